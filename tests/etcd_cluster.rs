//! A real 3-member etcd cluster on the masters' lab IPs (192.168.126.101-103), each member in its
//! own network namespace, with the bundle's etcd-server, etcd-peer-<master> and etcd-client
//! certificates. A second run with the server certificate's clientAuth removed must break the
//! JSON gateway, as it does on a real node (field notes §2), so the first run proves something.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MASTERS: [(&str, u8); 3] = [("master-0", 101), ("master-1", 102), ("master-2", 103)];
const CLIENT_IP: u8 = 99;

/// The members' and the client's hosts in network namespaces on one bridge (common::netns, the
/// boot lab's), and the etcd processes in them; torn down on drop.
struct Lab {
    net: common::netns::Netns,
    children: Vec<Child>,
}

impl Lab {
    fn new(tag: &str) -> Lab {
        let octets: Vec<String> = MASTERS.iter().map(|m| m.1).chain([CLIENT_IP]).map(|o| o.to_string()).collect();
        let addrs: Vec<[String; 1]> = octets.iter().map(|o| [format!("192.168.126.{o}/24")]).collect();
        let addr_refs: Vec<Vec<&str>> = addrs.iter().map(|a| a.iter().map(String::as_str).collect()).collect();
        let hosts: Vec<(&str, &[&str])> = octets.iter().zip(&addr_refs).map(|(o, a)| (o.as_str(), a.as_slice())).collect();
        Lab {
            net: common::netns::Netns::new(tag, &hosts),
            children: vec![],
        }
    }

    fn ns(&self, name: &str) -> String {
        self.net.ns(name)
    }

    /// Start the three members with `server_crt` as their client-facing certificate.
    fn start_etcd(&mut self, pki_dir: &Path, server_crt: &Path, data: &Path) {
        let cluster: Vec<String> = MASTERS.iter().map(|(n, o)| format!("{n}=https://192.168.126.{o}:2380")).collect();
        for (name, octet) in MASTERS {
            let addr = format!("192.168.126.{octet}");
            let f = |n: &str| pki_dir.join(n).to_string_lossy().to_string();
            let log = std::fs::File::create(data.join(format!("{name}.log"))).unwrap();
            let child = Command::new("ip")
                .args(["netns", "exec", &self.ns(&octet.to_string()), "etcd", "--name", name])
                .args(["--data-dir", &data.join(name).to_string_lossy()])
                .args(["--listen-client-urls", &format!("https://{addr}:2379")])
                .args(["--advertise-client-urls", &format!("https://{addr}:2379")])
                .args(["--listen-peer-urls", &format!("https://{addr}:2380")])
                .args(["--initial-advertise-peer-urls", &format!("https://{addr}:2380")])
                .args(["--initial-cluster", &cluster.join(","), "--initial-cluster-state", "new"])
                .args(["--cert-file", &server_crt.to_string_lossy(), "--key-file", &f("etcd-server.key")])
                .args(["--trusted-ca-file", &f("etcd-ca.crt"), "--client-cert-auth"])
                .args([
                    "--peer-cert-file",
                    &f(&format!("etcd-peer-{name}.crt")),
                    "--peer-key-file",
                    &f(&format!("etcd-peer-{name}.key")),
                ])
                .args(["--peer-trusted-ca-file", &f("etcd-ca.crt"), "--peer-client-cert-auth"])
                .args(["--logger", "zap", "--log-outputs", "stderr"])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start etcd");
            self.children.push(child);
        }
    }

    fn stop_etcd(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Run a client command in the client namespace.
    fn client(&self, program: &str, args: &[&str]) -> (bool, String) {
        let ns = self.ns(&CLIENT_IP.to_string());
        let mut all = vec!["netns", "exec", &ns, program];
        all.extend_from_slice(args);
        run("ip", &all)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // The namespaces go with `net`.
        self.stop_etcd();
    }
}

struct Etcdctl {
    ca: String,
    cert: String,
    key: String,
}

impl Etcdctl {
    fn new(pki_dir: &Path) -> Self {
        let f = |n: &str| pki_dir.join(n).to_string_lossy().to_string();
        Etcdctl {
            ca: f("etcd-ca.crt"),
            cert: f("etcd-client.crt"),
            key: f("etcd-client.key"),
        }
    }

    fn run(&self, lab: &Lab, args: &[&str]) -> (bool, String) {
        let endpoints = MASTERS
            .iter()
            .map(|m| format!("https://192.168.126.{}:2379", m.1))
            .collect::<Vec<_>>()
            .join(",");
        let mut all: Vec<&str> = vec![
            "--cacert",
            &self.ca,
            "--cert",
            &self.cert,
            "--key",
            &self.key,
            "--endpoints",
            &endpoints,
        ];
        all.extend_from_slice(args);
        lab.client("env", &[&["ETCDCTL_API=3", "etcdctl"], all.as_slice()].concat())
    }

    /// POST to the JSON gateway of master-0 with the client certificate.
    fn gateway(&self, lab: &Lab, path: &str, body: &str) -> (bool, String) {
        let url = format!("https://192.168.126.101:2379{path}");
        lab.client(
            "curl",
            &[
                "-sS",
                "--fail-with-body",
                "--max-time",
                "5",
                "--cacert",
                &self.ca,
                "--cert",
                &self.cert,
                "--key",
                &self.key,
                "-X",
                "POST",
                "-d",
                body,
                &url,
            ],
        )
    }
}

fn wait_healthy(ctl: &Etcdctl, lab: &Lab, data: &Path) {
    let start = Instant::now();
    loop {
        let (ok, out) = ctl.run(lab, &["endpoint", "health", "--cluster"]);
        if ok && out.matches("is healthy").count() == 3 {
            return;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let logs: String = MASTERS
                .iter()
                .map(|(n, _)| {
                    std::fs::read_to_string(data.join(format!("{n}.log")))
                        .unwrap_or_default()
                        .lines()
                        .rev()
                        .take(15)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .collect::<Vec<_>>()
                .join("\n---\n");
            panic!("etcd cluster did not become healthy: {out}\n{logs}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A copy of etcd-server.crt re-signed by the bundle's etcd-ca with serverAuth only.
fn server_cert_without_client_auth(pki_dir: &Path, work: &Path) -> PathBuf {
    let f = |n: &str| pki_dir.join(n).to_string_lossy().to_string();
    let csr = work.join("server.csr");
    let ext = work.join("ext.cnf");
    let out = work.join("server-noclient.crt");
    let (ok, text) = run(
        "openssl",
        &["x509", "-in", &f("etcd-server.crt"), "-noout", "-ext", "subjectAltName"],
    );
    assert!(ok, "{text}");
    let sans = text.lines().nth(1).unwrap().trim().replace("IP Address:", "IP:");
    std::fs::write(&ext, format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName={sans}\n")).unwrap();
    let (ok, text) = run(
        "openssl",
        &[
            "req",
            "-new",
            "-key",
            &f("etcd-server.key"),
            "-subj",
            "/CN=etcd-server",
            "-out",
            &csr.to_string_lossy(),
        ],
    );
    assert!(ok, "{text}");
    let (ok, text) = run(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            &csr.to_string_lossy(),
            "-CA",
            &f("etcd-ca.crt"),
            "-CAkey",
            &f("etcd-ca.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-sha256",
            "-extfile",
            &ext.to_string_lossy(),
            "-out",
            &out.to_string_lossy(),
        ],
    );
    assert!(ok, "{text}");
    out
}

#[test]
fn generated_certs_run_a_real_three_member_etcd_on_lab_ips() {
    let d = example_copy();
    create(d.path(), &[]);
    let pki_dir = d.path().join("pki");
    let work = tempfile::tempdir().unwrap();
    let ctl = Etcdctl::new(&pki_dir);

    // 1. The bundle as generated: cluster forms, every member healthy, gateway answers.
    let mut lab = Lab::new("a");
    let data = work.path().join("good");
    std::fs::create_dir_all(&data).unwrap();
    lab.start_etcd(&pki_dir, &pki_dir.join("etcd-server.crt"), &data);
    wait_healthy(&ctl, &lab, &data);
    let (ok, members) = ctl.run(&lab, &["member", "list", "-w", "simple"]);
    assert!(ok, "{members}");
    for (name, octet) in MASTERS {
        assert!(
            members.contains(&format!(
                "{name}, https://192.168.126.{octet}:2380, https://192.168.126.{octet}:2379"
            )),
            "{members}"
        );
    }
    // key "hardshift" = aGFyZHNoaWZ0, value "ok" = b2s=
    let (ok, put) = ctl.gateway(&lab, "/v3/kv/put", r#"{"key":"aGFyZHNoaWZ0","value":"b2s="}"#);
    assert!(ok && put.contains("revision"), "gateway put failed: {put}");
    let (ok, range) = ctl.gateway(&lab, "/v3/kv/range", r#"{"key":"aGFyZHNoaWZ0"}"#);
    assert!(ok && range.contains(r#""value":"b2s=""#), "gateway range failed: {range}");
    lab.stop_etcd();
    drop(lab);

    // 2. Same cluster with a server certificate lacking clientAuth: it forms, but the gateway
    //    (which dials etcd with that certificate) fails.
    let bad = server_cert_without_client_auth(&pki_dir, work.path());
    let mut lab = Lab::new("b");
    let data = work.path().join("bad");
    std::fs::create_dir_all(&data).unwrap();
    lab.start_etcd(&pki_dir, &bad, &data);
    wait_healthy(&ctl, &lab, &data);
    let (ok, range) = ctl.gateway(&lab, "/v3/kv/range", r#"{"key":"aGFyZHNoaWZ0"}"#);
    assert!(!ok, "the JSON gateway must fail with a serverAuth-only certificate, got: {range}");
}
