//! The real control plane as the bundle describes it. From a fresh bundle of the example lab, the
//! bootstrap's filesystem is laid out under a scratch root (every file of `bootstrap.ign`), and
//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as processes with EXACTLY
//! the command and args of the static pods in that Ignition config, parsed with k8s-openapi.
//!
//! The only changes (README, "The real control plane in tests"): a container's mount path becomes
//! its volume's hostPath under the scratch root; `hyperkube NAME` runs the binary NAME built by
//! hack/setup.sh. Each node runs in a network namespace that owns its lab address, with an
//! /etc/hosts of its own for the lab's names, so no address or bind flag is rewritten.

use super::netns::Netns;
use super::{create, example_copy, text};
pub use hardshift_generator::cluster::Role;
use hardshift_generator::ignition::{self, Config};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The example's names and addresses (tests that run on the example alone); the harness itself
/// takes every name and address from the bundle's inputs (`Lab`).
pub const DOMAIN: &str = "ocp4.example.com";
pub const BOOTSTRAP_IP: &str = "192.168.126.100";
pub const MASTER0_IP: &str = "192.168.126.101";
/// The helper (the workstation): DNS, HAProxy and the collector in the lab.
pub const HELPER_IP: &str = "192.168.126.1";

/// The lab a bundle was made for, as the harness needs it: read from its inputs as `create` reads
/// them, so a test runs the same on the example and on a lab with other names and addresses.
#[derive(Clone, Debug)]
pub struct Lab {
    /// The cluster's name (the lab's files are named for it).
    pub name: String,
    /// `<name>.<baseDomain>`.
    pub domain: String,
    pub bootstrap_ip: String,
    /// The node that runs the bootstrap control plane: the bootstrap host, or a single node.
    pub boot_host: String,
    /// The first master's hostname and address (its namespace is always `master-0`).
    pub master0: String,
    pub master0_ip: String,
    pub helper_ip: String,
    pub api_vip: String,
    pub ingress_vip: String,
    pub prefix: u8,
    /// Every node's hostname and role, bootstrap first.
    pub nodes: Vec<(String, Role)>,
}

impl Lab {
    pub fn of(dir: &Path) -> Lab {
        use hardshift_generator::config;
        let sources = config::read_sources(dir, None).unwrap_or_else(|e| panic!("{}: {e:?}", dir.display()));
        let c = config::build(&sources, &config::Overrides::default()).unwrap_or_else(|e| panic!("{}: {e:?}", dir.display()));
        let first = |r: Role| {
            c.nodes
                .iter()
                .find(|n| n.role == r)
                .unwrap_or_else(|| panic!("no {} in {}", r.as_str(), dir.display()))
        };
        let m0 = first(Role::Master);
        // A single node (bootstrap-in-place) runs the bootstrap itself.
        let boot = if c.single_node() { m0 } else { first(Role::Bootstrap) };
        Lab {
            name: c.name.clone(),
            domain: c.domain(),
            bootstrap_ip: boot.ip.to_string(),
            boot_host: boot.hostname.clone(),
            master0: m0.hostname.clone(),
            master0_ip: m0.ip.to_string(),
            helper_ip: c.helper_ip.to_string(),
            api_vip: c.api_vip.to_string(),
            ingress_vip: c.ingress_vip.to_string(),
            prefix: m0.prefix,
            nodes: c.nodes.iter().map(|n| (n.hostname.clone(), n.role)).collect(),
        }
    }

    /// The hostnames of the nodes of `role`.
    pub fn of_role(&self, role: Role) -> Vec<String> {
        self.nodes.iter().filter(|(_, r)| *r == role).map(|(n, _)| n.clone()).collect()
    }
}

/// A binary of the release's Kubernetes (1.31 for OpenShift 4.18) from `HARDSHIFT_KUBE_BIN`: no
/// registry here ships them, so the tests that need them are a tier (`#[ignore = "needs
/// HARDSHIFT_KUBE_BIN: …"]`) that hack/test.sh runs only when that directory is given.
pub fn kube_bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("HARDSHIFT_KUBE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("HARDSHIFT_KUBE_BIN is unset: this test needs the release's Kubernetes binaries (see hack/tiers)"));
    let p = dir.join(name);
    assert!(p.is_file(), "{} is missing (HARDSHIFT_KUBE_BIN={})", p.display(), dir.display());
    p
}

/// The release's own CRDs (the default feature set of ../shared/openshift-4.18/crds) in place of
/// the example's stand-ins, as a user extracts them into DIR/crds: the real API server prunes by
/// their schemas, so a field they do not declare fails the read-back comparison.
pub fn release_crds_into(dir: &Path) {
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/openshift-4.18/crds");
    let set = hardshift_generator::crd::CrdSet::load_dir(&real).unwrap_or_else(|e| panic!("{}: {e}", real.display()));
    let crds = dir.join("crds");
    let _ = std::fs::remove_dir_all(&crds);
    std::fs::create_dir_all(&crds).unwrap();
    for c in &set.crds {
        std::fs::copy(real.join(&c.file), crds.join(&c.file)).unwrap();
    }
}

pub fn load_ign_file(path: &Path) -> Config {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn load_ign(bundle: &Path, node: &str) -> Config {
    let bytes = std::fs::read(bundle.join(format!("ignition/{node}.ign"))).unwrap();
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{node}.ign: {e}"))
}

/// The last `n` lines of a log file.
pub fn tail(path: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A node's filesystem under a scratch root: every file and directory of its Ignition config.
pub struct NodeRoot {
    pub root: PathBuf,
    pub cfg: Config,
}

impl NodeRoot {
    pub fn lay(cfg: Config, root: &Path) -> NodeRoot {
        for d in &cfg.storage.directories {
            std::fs::create_dir_all(root.join(d.path.trim_start_matches('/'))).unwrap();
        }
        for f in &cfg.storage.files {
            let Some(bytes) = f.contents.as_ref().and_then(ignition::decode) else {
                continue; // fetched by URL on a real node (the agent with --agent-url)
            };
            let p = root.join(f.path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(f.mode.unwrap_or(0o644))).unwrap();
        }
        NodeRoot {
            root: root.to_path_buf(),
            cfg,
        }
    }

    /// Where an absolute node path lives under the scratch root.
    pub fn map(&self, path: &str) -> String {
        format!("{}{}", self.root.display(), path)
    }

    pub fn file(&self, path: &str) -> Vec<u8> {
        let f = self.cfg.storage.files.iter().find(|f| f.path == path);
        let f = f.unwrap_or_else(|| panic!("no {path} in the node's Ignition config"));
        ignition::decode(f.contents.as_ref().unwrap()).unwrap()
    }

    pub fn text(&self, path: &str) -> String {
        String::from_utf8(self.file(path)).unwrap()
    }

    pub fn unit(&self, name: &str) -> String {
        let u = self.cfg.systemd.units.iter().find(|u| u.name == name);
        u.and_then(|u| u.contents.clone()).unwrap_or_else(|| panic!("no unit {name}"))
    }

    /// Static pods in the node's manifest directory, by file name.
    pub fn static_pods(&self) -> Vec<(String, Pod)> {
        let mut out = Vec::new();
        for f in &self.cfg.storage.files {
            if let Some(name) = f.path.strip_prefix("/etc/kubernetes/manifests/") {
                let v = hardshift_generator::config::yaml::parse(&self.text(&f.path)).unwrap().value;
                let pod: Pod = serde_json::from_value(v).unwrap_or_else(|e| panic!("{name} is not a Pod: {e}"));
                out.push((name.to_string(), pod));
            }
        }
        out
    }
}

/// A systemd unit's ExecStart, continuation lines joined, split into words.
pub fn exec_start(unit: &str) -> Vec<String> {
    let joined = unit.replace("\\\n", " ");
    let line = joined
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap_or_else(|| panic!("no ExecStart in\n{unit}"));
    line.split_whitespace().map(String::from).collect()
}

/// The static pod in file `name` of `pods`.
fn static_pod(pods: &[(String, Pod)], name: &str) -> Pod {
    pods.iter()
        .find(|(f, _)| f == name)
        .unwrap_or_else(|| panic!("no static pod {name}"))
        .1
        .clone()
}

/// A static pod's container as a process.
#[derive(Debug, Clone)]
pub struct Process {
    pub name: String,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Each mount path of container `c` with its volume's hostPath under `root`, longest first (so a
/// path maps by the deepest mount it is under).
fn mounts(spec: &PodSpec, c: &Container, root: &NodeRoot) -> Vec<(String, String)> {
    let mut mounts: Vec<(String, String)> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let vol = spec.volumes.iter().flatten().find(|v| v.name == m.name).expect("volume of mount");
            let host = &vol.host_path.as_ref().expect("hostPath volume").path;
            (m.mount_path.trim_end_matches('/').to_string(), root.map(host))
        })
        .collect();
    mounts.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));
    mounts
}

/// `v` with the mount path it is under replaced by that mount's host path.
fn map_mounted(mounts: &[(String, String)], v: &str) -> String {
    mounts
        .iter()
        .find(|(m, _)| v == m || v.starts_with(&format!("{m}/")))
        .map(|(m, h)| format!("{h}{}", &v[m.len()..]))
        .unwrap_or_else(|| v.to_string())
}

/// The container's command and args, exactly, with each mount path (also in a comma-separated
/// list) replaced by its volume's hostPath under `root` (longest mount path first), and
/// `hyperkube NAME` by the release's binary.
pub fn pod_process(pod: &Pod, root: &NodeRoot) -> Process {
    let spec = pod.spec.as_ref().expect("pod spec");
    let c = &spec.containers[0];
    let mut words: Vec<String> = c.command.clone().unwrap_or_default();
    words.extend(c.args.clone().unwrap_or_default());
    let mounts = mounts(spec, c, root);
    let map = |w: &str| -> String {
        let (flag, value) = match w.split_once('=') {
            Some((f, v)) => (Some(f), v),
            None => (None, w),
        };
        // Each path of a list (`--tls-sni-cert-key=CRT,KEY`) too.
        let mapped = value.split(',').map(|v| map_mounted(&mounts, v)).collect::<Vec<_>>().join(",");
        match flag {
            Some(f) => format!("{f}={mapped}"),
            None => mapped,
        }
    };
    let (program, rest) = if words[0] == "hyperkube" {
        (kube_bin(&words[1]).to_string_lossy().to_string(), words[2..].to_vec())
    } else {
        // /usr/bin/etcd: Debian's etcd.
        let base = Path::new(&words[0]).file_name().unwrap().to_string_lossy().to_string();
        (base, words[1..].to_vec())
    };
    Process {
        name: c.name.clone(),
        program,
        args: rest.iter().map(|w| map(w)).collect(),
        env: c
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect(),
    }
}

/// The bootstrap control plane of a fresh example bundle, running; everything stops on drop.
pub struct ControlPlane {
    pub bundle: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub net: Netns,
    pub boot: NodeRoot,
    /// The bundle's names and addresses.
    pub lab: Lab,
    pub pids: BTreeMap<String, u32>,
    /// (what, how long) for hack/bench-control-plane.sh.
    pub timings: Vec<(String, Duration)>,
    /// The rendered pods' containers, restarted when they exit (as the kubelet does a static
    /// pod's), and how many times each was.
    pub supervised: BTreeMap<String, (Process, u32)>,
}

impl ControlPlane {
    /// A bundle (`create` with `extra` args), namespaces for the bootstrap and master-0, and the
    /// bootstrap's static pods as processes; returns once /readyz answers ok.
    pub fn start(extra: &[&str]) -> ControlPlane {
        Self::start_inputs(example_copy(), extra)
    }

    /// As `start`, on the inputs in `bundle` (e.g. `second_lab()`).
    pub fn start_inputs(bundle: tempfile::TempDir, extra: &[&str]) -> ControlPlane {
        // The default create embeds the agent built beside hardshift, as on a real node.
        super::agent_bin();
        release_crds_into(bundle.path());
        create(bundle.path(), extra);
        Self::start_from(bundle, |_| {})
    }

    /// The bundle's bootstrap laid out, and the lab's namespaces: nothing running yet.
    pub fn lab(bundle: tempfile::TempDir) -> ControlPlane {
        Self::lab_with(bundle, |_| {})
    }

    fn lab_with(bundle: tempfile::TempDir, tamper: impl FnOnce(&NodeRoot)) -> ControlPlane {
        for b in ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"] {
            kube_bin(b);
        }
        let work = tempfile::tempdir().unwrap();
        let lab = Lab::of(bundle.path());
        let boot = NodeRoot::lay(load_ign(bundle.path(), &lab.boot_host), &work.path().join("bootstrap"));
        // A single node is both: no second namespace with its address.
        let single = lab.bootstrap_ip == lab.master0_ip;
        tamper(&boot);
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let tag = format!("cp{}", SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        let cidr = |ip: &str| format!("{ip}/{}", lab.prefix);
        let (b, m) = (cidr(&lab.bootstrap_ip), cidr(&lab.master0_ip));
        // The helper holds the lab's VIPs too, for a test that runs its HAProxy.
        let (h, api, apps) = (cidr(&lab.helper_ip), cidr(&lab.api_vip), cidr(&lab.ingress_vip));
        let (b_addr, m_addr, helper_addrs) = ([b.as_str()], [m.as_str()], [h.as_str(), api.as_str(), apps.as_str()]);
        let mut nss: Vec<(&str, &[&str])> = vec![("bootstrap", &b_addr)];
        if !single {
            nss.push(("master-0", &m_addr));
        }
        // A single node's VIPs are its own address (hardshift.yaml names none).
        let helper_addrs: Vec<&str> = helper_addrs.into_iter().filter(|a| !single || *a != b.as_str()).collect();
        nss.push(("helper", &helper_addrs));
        let mut net = Netns::new(&tag, &nss);
        // The load balancer's names point at the bootstrap, as HAProxy does before the pivot.
        let d = &lab.domain;
        let names = [
            (lab.bootstrap_ip.as_str(), format!("api.{d} api-int.{d} bootstrap.{d}")),
            (lab.master0_ip.as_str(), format!("{}.{d}", lab.master0)),
        ];
        let names: Vec<(&str, &str)> = names.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let names: Vec<(&str, &str)> = if single { names[..1].to_vec() } else { names };
        net.route("bootstrap", &lab.helper_ip);
        if !single {
            net.route("master-0", &lab.helper_ip);
        }
        for n in nss.iter().map(|(n, _)| *n) {
            net.hosts(n, &lab.helper_ip, &names);
        }
        ControlPlane {
            bundle,
            work,
            net,
            boot,
            lab,
            pids: BTreeMap::new(),
            timings: vec![],
            supervised: BTreeMap::new(),
        }
    }

    /// As `start`, after `tamper` changed the laid-out bootstrap root (to prove a test can fail).
    pub fn start_from(bundle: tempfile::TempDir, tamper: impl FnOnce(&NodeRoot)) -> ControlPlane {
        let mut cp = Self::lab_with(bundle, tamper);
        let pods = cp.boot.static_pods();
        let by = |n: &str| static_pod(&pods, n);
        let t0 = Instant::now();
        cp.spawn_pod(&by("etcd-bootstrap.yaml"));
        cp.wait_etcd_healthy(Duration::from_secs(30));
        cp.timings.push(("etcd healthy".into(), t0.elapsed()));
        let t1 = Instant::now();
        cp.spawn_pod(&by("kube-apiserver-bootstrap.yaml"));
        cp.wait_ready(Duration::from_secs(90));
        cp.timings.push(("etcd → API ready".into(), t1.elapsed()));
        cp.spawn_pod(&by("kube-controller-manager-bootstrap.yaml"));
        cp.spawn_pod(&by("kube-scheduler-bootstrap.yaml"));
        cp
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.work.path().join(format!("{name}.log"))
    }

    /// Start a static pod's container in the bootstrap's namespace.
    pub fn spawn_pod(&mut self, pod: &Pod) {
        let p = pod_process(pod, &self.boot);
        let log = self.log_path(&p.name);
        let pid = self.net.spawn_logged("bootstrap", &p.program, &p.args, &p.env, &log);
        self.pids.insert(p.name, pid);
    }

    /// Wait for `f`, failing with the tail of `log`'s file, at once if that process has exited.
    pub fn wait<T>(&self, what: &str, timeout: Duration, log: &str, mut f: impl FnMut(&Self) -> Result<T, String>) -> T {
        let start = Instant::now();
        loop {
            let dead = self.pids.get(log).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
                || self.pids.get(log).is_some_and(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.split(' ').nth(2) == Some("Z"))
                });
            match f(self) {
                Ok(v) => return v,
                Err(last) if dead || start.elapsed() > timeout => panic!(
                    "{} waiting for {what}; last: {last}\n--- {log}.log:\n{}",
                    if dead {
                        format!("{log} exited")
                    } else {
                        format!("timed out after {timeout:?}")
                    },
                    tail(&self.log_path(log), 400)
                ),
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        }
    }

    /// Wait for the bootstrap's etcd to say it is healthy to the client certificate bootkube uses.
    pub fn wait_etcd_healthy(&self, timeout: Duration) {
        let secret = |f: &str| self.boot.map(&format!("/etc/kubernetes/bootstrap-secrets/{f}"));
        let (ca, cert, key) = (secret("etcd-ca.crt"), secret("etcd-client.crt"), secret("etcd-client.key"));
        let args = [
            "-sS",
            "--cacert",
            &ca,
            "--cert",
            &cert,
            "--key",
            &key,
            "https://localhost:2379/health",
        ];
        self.wait("etcd healthy", timeout, "etcd", |cp| {
            let (ok, out) = cp.exec("bootstrap", "curl", &args);
            if ok && out.contains("\"health\":\"true\"") {
                Ok(())
            } else {
                Err(out)
            }
        });
    }

    /// Wait for the API server's `/readyz` to say ok.
    pub fn wait_ready(&self, timeout: Duration) {
        self.wait("kube-apiserver /readyz", timeout, "kube-apiserver", |cp| {
            let (ok, out) = cp.kubectl(&["get", "--raw", "/readyz"]);
            if ok && out.trim() == "ok" {
                Ok(())
            } else {
                Err(out)
            }
        });
    }

    /// Run a program in a node's namespace.
    pub fn exec(&self, node: &str, program: &str, args: &[&str]) -> (bool, String) {
        let out = self
            .net
            .command(node, program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        (out.status.success(), format!("{}{}", text(&out.stdout), text(&out.stderr)))
    }

    /// kubectl on the bootstrap with the bootstrap's own localhost kubeconfig (what bootkube uses).
    pub fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let kc = self.boot.map("/etc/kubernetes/kubeconfigs/localhost.kubeconfig");
        self.kubectl_with(&kc, args)
    }

    pub fn kubectl_with(&self, kubeconfig: &str, args: &[&str]) -> (bool, String) {
        let mut all = vec!["--kubeconfig", kubeconfig, "--request-timeout=20s"];
        all.extend_from_slice(args);
        self.exec("bootstrap", "kubectl", &all)
    }

    /// Parse kubectl's JSON output, failing with what it said.
    pub fn kubectl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let (ok, out) = self.kubectl(&all);
        assert!(ok, "kubectl {}: {out}", args.join(" "));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {}: {e}: {out}", args.join(" ")))
    }

    /// The generated bootkube.sh, with the node's paths mapped under the scratch root, written
    /// to the work dir.
    fn bootkube_script(&self) -> PathBuf {
        let mut mapped = self.boot.text("/usr/local/bin/bootkube.sh");
        for p in ["/opt/openshift", "/var/lib/hardshift", "/etc/kubernetes"] {
            mapped = mapped.replace(p, &self.boot.map(p));
        }
        let path = self.work.path().join("bootkube.sh");
        std::fs::write(&path, mapped).unwrap();
        path
    }

    /// The generated bootkube.sh (`bootkube_script`) run to its end with real kubectl; returns
    /// (success, output).
    pub fn run_bootkube(&mut self) -> (bool, String) {
        let path = self.bootkube_script();
        let t = Instant::now();
        let r = self.exec("bootstrap", "bash", &[path.to_str().unwrap()]);
        self.timings.push(("bootkube".into(), t.elapsed()));
        r
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Stop the API server's clients first, then the API server, then etcd.
        for n in ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"] {
            if let Some(pid) = self.pids.remove(n) {
                self.net.kill(pid);
            }
        }
    }
}

/// A rendered static pod's container (the release's renders, its control plane, placed by `create`)
/// as a process. As `pod_process`, and: the container is the one named `container`; a shell
/// script is reduced to the command it runs (`hyperkube NAME ...`, `exec etcd ...`, continuation
/// lines joined); `${VAR}`, `$(VAR)` and `$VAR` come from its env, the downward API's host IP and
/// node name given; every mount path is mapped in its env values too, and in the configs its
/// `/etc/kubernetes/config` volume holds (the paths they name are the container's).
pub fn rendered_process(pod: &Pod, container: &str, root: &NodeRoot, ip: &str, node: &str) -> Process {
    let spec = pod.spec.as_ref().expect("pod spec");
    let c = spec
        .containers
        .iter()
        .find(|c| c.name == container)
        .unwrap_or_else(|| panic!("no container {container}"));
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let env: Vec<(String, String)> = c
        .env
        .iter()
        .flatten()
        .map(|e| {
            let field = e
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str());
            let v = match field {
                Some("status.hostIP" | "status.podIP") => ip.to_string(),
                Some("spec.nodeName") => node.to_string(),
                Some("metadata.namespace") => ns.clone(),
                _ => e.value.clone().unwrap_or_default(),
            };
            (e.name.clone(), v)
        })
        .collect();
    let mounts = mounts(spec, c, root);
    for (_, h) in &mounts {
        std::fs::create_dir_all(h).unwrap();
    }
    let map_path = |v: &str| map_mounted(&mounts, v);
    let map_word = |w: &str| -> String {
        let (flag, value) = match w.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (Some(f), v),
            _ => (None, w),
        };
        let mapped = value.split(',').map(map_path).collect::<Vec<_>>().join(",");
        flag.map_or(mapped.clone(), |f| format!("{f}={mapped}"))
    };
    let expand = |w: &str| -> String {
        let mut w = w.to_string();
        for (k, v) in &env {
            w = w
                .replace(&format!("${{{k}}}"), v)
                .replace(&format!("$({k})"), v)
                .replace(&format!("${k}"), v);
        }
        w
    };
    let mut words: Vec<String> = c.command.clone().unwrap_or_default();
    words.extend(c.args.clone().unwrap_or_default());
    if words.first().is_some_and(|w| w.ends_with("sh")) {
        let script = words.last().cloned().unwrap_or_default().replace("\\\n", " ");
        let line = script
            .lines()
            .find_map(|l| {
                l.find("hyperkube ")
                    .or_else(|| l.find("exec ").map(|i| i + 5))
                    .map(|i| l[i..].to_string())
            })
            .unwrap_or_else(|| panic!("{container}: no command in its script:\n{script}"));
        words = line
            .split_whitespace()
            .map(|w| w.trim_matches(|ch| ch == '"' || ch == '\'').to_string())
            .collect();
    }
    // The configs the container reads name its paths: map them once.
    if let Some((_, dir)) = mounts.iter().find(|(m, _)| m == "/etc/kubernetes/config") {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            if text.contains(root.root.to_str().unwrap()) {
                continue;
            }
            let mut mapped = text.clone();
            for (m, h) in &mounts {
                mapped = mapped.replace(&format!("{m}/"), &format!("{h}/"));
            }
            std::fs::write(e.path(), mapped).unwrap();
        }
    }
    let words: Vec<String> = words.iter().map(|w| map_word(&expand(w))).collect();
    let (program, rest) = if words[0] == "hyperkube" {
        (kube_bin(&words[1]).to_string_lossy().to_string(), words[2..].to_vec())
    } else {
        (
            Path::new(&words[0]).file_name().unwrap().to_string_lossy().to_string(),
            words[1..].to_vec(),
        )
    };
    Process {
        name: container.to_string(),
        program,
        args: rest,
        env: env.iter().map(|(k, v)| (k.clone(), map_word(v))).collect(),
    }
}

impl ControlPlane {
    /// The bootstrap control plane the release's renders made (a bundle made with
    /// renders beside it), started from their pods and configs as the kubelet starts
    /// them: etcd, and once it is healthy, the API server, the controller-manager and the
    /// scheduler together. None is waited for: bootkube.sh waits for what it needs
    /// (`run_bootkube_supervised` restarts what exits meanwhile).
    pub fn start_rendered(bundle: tempfile::TempDir) -> ControlPlane {
        let mut cp = Self::lab(bundle);
        cp.run_rendered_pods("etcd-member-pod.yaml");
        cp
    }

    /// The renders' etcd (from pod file `etcd_file`), once healthy their API server,
    /// controller-manager and scheduler, from the node root `boot`, supervised.
    pub fn run_rendered_pods(&mut self, etcd_file: &str) {
        let pods = self.boot.static_pods();
        let by = |n: &str| static_pod(&pods, n);
        let ip = self.lab.bootstrap_ip.clone();
        let node = self.lab.boot_host.clone();
        let p = rendered_process(&by(etcd_file), "etcd", &self.boot, &ip, &node);
        self.supervise(p);
        self.wait_etcd_healthy(Duration::from_secs(60));
        for (pod, container) in [
            ("kube-apiserver-pod.yaml", "kube-apiserver"),
            ("kube-controller-manager-pod.yaml", "kube-controller-manager"),
            ("kube-scheduler-pod.yaml", "kube-scheduler"),
        ] {
            let p = rendered_process(&by(pod), container, &self.boot, &ip, &node);
            self.supervise(p);
        }
    }

    /// Stop a supervised container for good (a static pod's manifest moved away).
    pub fn stop(&mut self, name: &str) {
        self.supervised.remove(name);
        if let Some(pid) = self.pids.remove(name) {
            self.net.kill(pid);
        }
    }

    /// A reboot into `installed`: every container stopped, the node's root replaced.
    pub fn reboot_into(&mut self, installed: NodeRoot) {
        for n in ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"] {
            self.stop(n);
        }
        self.boot = installed;
    }

    /// Start `p` in the bootstrap's namespace, in the node's root (a container's `/`), logging to
    /// its log (appended to across restarts), and keep it for `restart_exited`.
    fn supervise(&mut self, p: Process) {
        let log = self.log_path(&p.name);
        let root = self.boot.root.clone();
        let pid = self
            .net
            .spawn_logged_in("bootstrap", &p.program, &p.args, &p.env, &log, Some(&root));
        self.pids.insert(p.name.clone(), pid);
        let restarts = self.supervised.get(&p.name).map_or(0, |(_, n)| n + 1);
        self.supervised.insert(p.name.clone(), (p, restarts));
    }

    /// Start again every supervised container that has exited, as the kubelet does (restart
    /// policy Always), after a second.
    fn restart_exited(&mut self) {
        let names: Vec<String> = self.supervised.keys().cloned().collect();
        let mut exited = vec![];
        for n in names {
            if let Some(&pid) = self.pids.get(&n) {
                if self.net.exited(pid).is_some() {
                    exited.push(n);
                }
            }
        }
        for n in exited {
            let log = self.log_path(&n);
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            std::io::Write::write_all(&mut f, b"--- exited; restarted by the test's kubelet ---\n").unwrap();
            std::thread::sleep(Duration::from_secs(1));
            let p = self.supervised[&n].0.clone();
            self.supervise(p);
        }
    }

    /// bootkube.sh run (paths mapped as `run_bootkube`) while the supervised containers are
    /// restarted when they exit; its success and output.
    pub fn run_bootkube_supervised(&mut self, timeout: Duration) -> (bool, String) {
        let path = self.bootkube_script();
        let log = self.log_path("bootkube");
        let t = Instant::now();
        let pid = self
            .net
            .spawn_logged("bootstrap", "bash", &[path.to_string_lossy().to_string()], &[], &log);
        let status = loop {
            if let Some(s) = self.net.exited(pid) {
                break Some(s);
            }
            if t.elapsed() > timeout {
                self.net.kill(pid);
                break None;
            }
            self.restart_exited();
            std::thread::sleep(Duration::from_millis(500));
        };
        self.timings.push(("bootkube".into(), t.elapsed()));
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        match status {
            Some(s) => (s.success(), out),
            None => (false, format!("{out}\n(timed out after {timeout:?})")),
        }
    }

    /// How many times each supervised container was restarted.
    pub fn restarts(&self) -> BTreeMap<String, u32> {
        self.supervised.iter().map(|(n, (_, r))| (n.clone(), *r)).collect()
    }
}

/// `hardshift approve-csrs` once, on the bootstrap, with its localhost kubeconfig; its output.
pub fn approve_csrs(cp: &ControlPlane) -> String {
    let kc = cp.boot.map("/etc/kubernetes/kubeconfigs/localhost.kubeconfig");
    let (ok, out) = cp.exec(
        "bootstrap",
        env!("CARGO_BIN_EXE_hardshift"),
        &["approve-csrs", "--dir", cp.bundle.path().to_str().unwrap(), "--kubeconfig", &kc],
    );
    assert!(ok, "approve-csrs: {out}");
    out
}

/// Is CSR `name` still pending (neither approved nor denied)?
pub fn still_pending(cp: &ControlPlane, name: &str) -> bool {
    cp.kubectl_json(&["get", "csr", name])["status"].get("conditions").is_none()
}

/// The first pending CSR for `signer`.
pub fn pending_csr(cp: &ControlPlane, signer: &str) -> Result<Value, String> {
    let all = cp.kubectl_json(&["get", "csr"]);
    all["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["spec"]["signerName"] == signer && c["status"].get("conditions").is_none())
        .cloned()
        .ok_or_else(|| format!("no pending {signer} CSR among {}", all["items"].as_array().unwrap().len()))
}

pub fn node_condition(cp: &ControlPlane, node: &str, kind: &str) -> Result<Value, String> {
    let (ok, out) = cp.kubectl(&["get", "node", node, "-o", "json"]);
    if !ok {
        return Err(out);
    }
    let v: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
    v["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .ok_or(format!("no {kind} condition yet"))
}

/// The node agent in `node`'s namespace with the node's own agent config and certificate (paths
/// mapped under `root`; no system bus here, so no systemd units), reporting every half second;
/// `extra` keys override the config's. Returns its pid.
pub fn start_agent(cp: &mut ControlPlane, node: &str, root: &NodeRoot, extra: Vec<(&str, toml::Value)>) -> u32 {
    let agent = super::agent_bin();
    let main = root.map("/etc/hardshift/agent.toml");
    let mut text = std::fs::read_to_string(&main).unwrap();
    for f in [
        "/etc/hardshift/agent-ca.crt",
        "/etc/hardshift/agent.crt",
        "/etc/hardshift/agent.key",
        "/etc/kubernetes/",
        "/var/lib/hardshift/",
        "/var/lib/etcd\"",
    ] {
        text = text.replace(&format!("\"{f}"), &format!("\"{}", root.map(f)));
    }
    assert!(text.contains("interval_ms = 5000"), "{text}");
    std::fs::write(&main, text).unwrap();
    let mut keys: Vec<(&str, toml::Value)> = vec![
        ("interval_ms", 500.into()),
        ("units", toml::Value::Array(vec![])),
        ("state_dir", root.map("/run/hardshift-agent").into()),
    ];
    keys.extend(extra);
    super::set_agent_keys(Path::new(&main), &keys);
    let log = cp.log_path(&format!("agent-{node}"));
    cp.net
        .spawn_logged(node, agent.to_str().unwrap(), &["--config".into(), main], &[], &log)
}

/// Wait until the API server reaches `node`'s kubelet through its proxy (TLS verified, the
/// kubelet's webhook authorizing it): `/healthz` answers ok.
pub fn wait_kubelet_proxy(cp: &ControlPlane, node: &str) {
    let path = format!("/api/v1/nodes/{node}/proxy/healthz");
    cp.wait("the API server → kubelet proxy", Duration::from_secs(60), "kubelet", |cp| {
        let (ok, out) = cp.kubectl(&["get", "--raw", &path]);
        if ok && out.trim() == "ok" {
            Ok(())
        } else {
            Err(out)
        }
    });
}
