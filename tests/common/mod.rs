//! Helpers for the end-to-end tests: a copy of the example lab in a temp dir, the real binary.
#![allow(dead_code)]

pub mod containerd;
pub mod control_plane;
pub mod netns;
pub mod podman;
pub mod renders;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ocp4");

/// A fresh copy of the example inputs (never the generated files).
/// The cluster name, base domain, address prefix and node-name prefixes of `second_lab`.
pub const SECOND_LAB: (&str, &str, &str) = ("edge", "lab.internal", "10.20.30.");

/// The example with other names and addresses: cluster `edge.lab.internal` on 10.20.30.0/24,
/// masters `cp-N` and workers `compute-N`, other MACs (what a test that passes only on the
/// example's names would miss).
pub fn second_lab() -> tempfile::TempDir {
    let t = example_copy();
    let (name, domain, net) = SECOND_LAB;
    for f in ["install-config.yaml", "agent-config.yaml", "hardshift.yaml"] {
        let p = t.path().join(f);
        let s = std::fs::read_to_string(&p)
            .unwrap()
            .replace("ocp4.example.com", &format!("{name}.{domain}"))
            .replace("baseDomain: example.com", &format!("baseDomain: {domain}"))
            .replace("  name: ocp4", &format!("  name: {name}"))
            .replace("192.168.126.", net)
            .replace("hostname: master-", "hostname: cp-")
            .replace("hostname: worker-", "hostname: compute-")
            .replace("52:54:00:00:00:", "52:54:00:20:30:");
        std::fs::write(&p, s).unwrap();
    }
    t
}

/// `lab` reshaped to single-node OpenShift as the installer takes it: one control-plane replica,
/// no workers, `bootstrapInPlace` with its installation disk, and agent-config's first master alone
/// (no bootstrap host).
pub fn single_node(lab: tempfile::TempDir) -> tempfile::TempDir {
    let ic = lab.path().join("install-config.yaml");
    let s = std::fs::read_to_string(&ic)
        .unwrap()
        .replace("  replicas: 3\n", "  replicas: 1\n")
        .replace("  replicas: 2\n", "  replicas: 0\n")
        .replace(
            "platform:\n",
            "bootstrapInPlace:\n  installationDisk: /dev/disk/by-id/wwn-0x64cd98f04fde100024684cf3034da5c2\nplatform:\n",
        );
    std::fs::write(&ic, s).unwrap();
    let ac = lab.path().join("agent-config.yaml");
    let text = std::fs::read_to_string(&ac).unwrap();
    let (head, hosts) = text.split_once("\nhosts:\n").expect("agent-config has hosts");
    let first_master = hosts
        .split("\n- ")
        .map(|h| h.trim_start_matches("- "))
        .find(|h| h.contains("role: master"))
        .expect("a master");
    // The rendezvous IP is the node's own.
    let ip = first_master
        .split("- ip: ")
        .nth(1)
        .and_then(|s| s.lines().next())
        .unwrap()
        .trim()
        .to_string();
    let head: String = head
        .lines()
        .map(|l| {
            if l.starts_with("rendezvousIP:") {
                format!("rendezvousIP: {ip}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&ac, format!("{head}\nhosts:\n- {first_master}\n")).unwrap();
    // No VIPs: the node answers api, api-int and *.apps itself.
    let hs = lab.path().join("hardshift.yaml");
    let s: String = std::fs::read_to_string(&hs)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("loadBalancer:") && !l.contains("apiVIP:") && !l.contains("ingressVIP:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&hs, s).unwrap();
    lab
}

pub fn example_copy() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    for f in ["install-config.yaml", "agent-config.yaml", "hardshift.yaml"] {
        std::fs::copy(Path::new(EXAMPLE).join(f), t.path().join(f)).expect("copy example");
    }
    for sub in ["release", "crds"] {
        let src = Path::new(EXAMPLE).join(sub);
        if src.is_dir() {
            std::fs::create_dir_all(t.path().join(sub)).unwrap();
            for e in std::fs::read_dir(&src).unwrap() {
                let p = e.unwrap().path();
                std::fs::copy(&p, t.path().join(sub).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    t
}

pub fn hardshift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args(args)
        .output()
        .expect("run hardshift")
}

/// `hardshift create --dir DIR [extra]`, asserting success.
pub fn create(dir: &Path, extra: &[&str]) -> Output {
    // The agent that create embeds, built (once per test binary) before any run: `cargo test
    // --workspace` links it with other features than `agent_bin`'s build, and a test comparing two
    // runs must not see it replaced in between.
    static AGENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    AGENT.get_or_init(agent_bin);
    let d = dir.to_str().unwrap();
    let mut args = vec!["create", "--dir", d];
    args.extend_from_slice(extra);
    // The example is an OVNKubernetes cluster and no MCO render runs here: say so. (It changes
    // nothing when a base is given; the refusal has tests of its own.)
    args.push("--self-contained-nodes");
    let out = hardshift(&args);
    assert!(out.status.success(), "create failed: {}\n{}", text(&out.stdout), text(&out.stderr));
    out
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// Replace `from` with `to` in an input file, asserting the text was there.
pub fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let p = dir.join(file);
    let s = std::fs::read_to_string(&p).unwrap();
    assert!(s.contains(from), "{file} does not contain {from:?}");
    std::fs::write(&p, s.replacen(from, to, 1)).unwrap();
}

/// Every file under `dir` (following the bundle's links), path → bytes.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().to_string();
            if rel.starts_with(".hardshift") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Run a program, returning (success, stdout+stderr).
pub fn run(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    (out.status.success(), format!("{}{}", text(&out.stdout), text(&out.stderr)))
}

pub fn pki(dir: &Path, name: &str) -> PathBuf {
    dir.join("pki").join(name)
}

/// A child process killed (and reaped) when dropped, so a failing test leaves nothing running.
pub struct Kill(pub std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP port free on every address right now, below the kernel's ephemeral range
/// (32768-60999 by default). A port from bind(":0") comes from that range, and the flood
/// tests' and the VM boots' outgoing connections take their source ports from it too: one
/// of them holding the port before the collector binds it made the collector fail to start.
/// Each port is handed out once per test process; other processes pick at random.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..10_000 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let port = 15_000 + (h.finish() % 17_000) as u16;
        if !given.contains(&port) && std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
    panic!("no free TCP port in 15000-31999")
}

/// The hardshift-agent binary of this build (built first: it is another package's).
pub fn agent_bin() -> PathBuf {
    // Without the variables cargo set for this test: ring's build script reruns when
    // CARGO_MANIFEST_DIR changes, and everything above it would be rebuilt on every run.
    let mut cmd = Command::new(env!("CARGO"));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().to_string();
        if k.starts_with("CARGO_") && k != "CARGO_HOME" && k != "CARGO_TARGET_DIR" {
            cmd.env_remove(k);
        }
    }
    cmd.args(["build", "-q", "-p", "hardshift-agent"]);
    // The agent of a FIPS build (`--features fips`) is a FIPS agent too.
    if hardshift_crypto::FIPS_BUILD {
        cmd.args(["--features", "fips"]);
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "building hardshift-agent");
    Path::new(env!("CARGO_BIN_EXE_hardshift")).with_file_name("hardshift-agent")
}

/// `hardshift-agent --config cfg`, its stderr in `log`, killed when dropped.
pub fn spawn_agent(cfg: &Path, log: &Path) -> Kill {
    let log = std::fs::File::create(log).unwrap();
    Kill(
        Command::new(agent_bin())
            .args(["--config", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("hardshift-agent"),
    )
}

/// `hardshift collector` for bundle `dir` on 127.0.0.1:`port`, logging to `dir/collector.log`.
pub fn collector(dir: &Path, port: u16) -> Kill {
    collector_with(dir, port, &[])
}

/// `collector` with more arguments.
pub fn collector_with(dir: &Path, port: u16, extra: &[&str]) -> Kill {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("collector.log"))
        .unwrap();
    Kill(
        Command::new(env!("CARGO_BIN_EXE_hardshift"))
            .args([
                "collector",
                "--dir",
                dir.to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .args(extra)
            // Tests run collectors side by side: each dashboard on a port of its own.
            .args(if extra.iter().any(|a| a.starts_with("--web") || *a == "--no-web") {
                &[][..]
            } else {
                &["--web", "127.0.0.1:0"][..]
            })
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// Wait until `child` listens on loopback `port`; if it exits first, fail with its `log`.
pub fn wait_listening(what: &str, child: &mut Kill, log: &Path, port: u16) {
    wait_for(what, 120, || {
        if let Ok(Some(status)) = child.0.try_wait() {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{what}: the process exited ({status}) before listening:\n{log}");
        }
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// Poll `f` every 100 ms until it holds; fail naming `what` after `secs`.
pub fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The seqs the collector of bundle `dir` stored for `node`'s current boot (none yet: empty).
pub fn stored(dir: &Path, node: &str) -> Vec<u64> {
    let db = dir.join("collector/reports.db");
    if !db.exists() {
        return vec![];
    }
    let s = hardshift_collector::store::Store::open(&db).unwrap();
    match s.boot_of(node).unwrap() {
        Some(b) => s.seqs(node, &b).unwrap(),
        None => vec![],
    }
}

/// An agent config dialing 127.0.0.1:`port` as `node`, with the agent certificate of `cert_of`
/// from the agent PKI directory `pki`; everything else at the agent's defaults.
pub fn agent_config(port: u16, node: &str, pki: &Path, cert_of: &str) -> hardshift_agent_config::AgentToml {
    hardshift_agent_config::AgentToml::new(
        format!("127.0.0.1:{port}"),
        node.into(),
        String::new(),
        pki.join("agent-ca.crt"),
        pki.join(format!("agent-{cert_of}.crt")),
        pki.join(format!("agent-{cert_of}.key")),
    )
}

/// An agent config for probing alone (`status`): no collector, no certificates.
pub fn probe_config(node: &str) -> hardshift_agent_config::AgentToml {
    let x = PathBuf::from("x");
    hardshift_agent_config::AgentToml::new("127.0.0.1:1".into(), node.into(), String::new(), x.clone(), x.clone(), x)
}

/// Write `c` at `path`, as the generator writes a node's.
pub fn write_agent_config(path: &Path, c: &hardshift_agent_config::AgentToml) {
    std::fs::write(path, hardshift_agent_config::to_toml(c).unwrap()).unwrap();
}

/// Set top-level keys of an agent config file (the node's generated one, say) as TOML: a key
/// already there is replaced, so the result is always one the agent can read.
pub fn set_agent_keys(path: &Path, keys: &[(&str, toml::Value)]) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut t: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: not TOML: {e}\n{text}", path.display()));
    for (k, v) in keys {
        t.insert((*k).to_string(), v.clone());
    }
    std::fs::write(path, toml::to_string(&t).unwrap()).unwrap();
}

/// A node's files from its Ignition config in the bundle: path → bytes.
pub fn node_files(dir: &Path, node: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
    let cfg: hardshift_generator::ignition::Config =
        serde_json::from_slice(&std::fs::read(dir.join(format!("ignition/{node}.ign"))).unwrap()).unwrap();
    cfg.storage
        .files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                hardshift_generator::ignition::decode(f.contents.as_ref().unwrap()).unwrap(),
            )
        })
        .collect()
}
