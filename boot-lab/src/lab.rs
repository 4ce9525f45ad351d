//! A bundle's lab, live, on a private bridge in network namespaces: the helper's addresses (its
//! own, the API and ingress VIPs, the collector's) with the bundle's generated dnsmasq (DHCP by
//! MAC and DNS), HAProxy, an HTTP server for the Ignition configs and `hardshift collector`; and
//! VMs that PXE-boot the test image through it with the inventory's MACs.
//!
//! What differs from a real RHCOS PXE boot is said in `ipxe_for_image`.

use crate::netns::{run, Netns};
use crate::watch::{self, Milestones};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a lab is made of.
pub struct Options {
    /// The bundle (`hardshift create` has run).
    pub dir: PathBuf,
    /// hack/boot-image.sh's directory: vmlinuz, initramfs.img, disk.raw.
    pub image: PathBuf,
    /// The `hardshift` binary (its collector).
    pub hardshift: PathBuf,
    /// Where logs, consoles and what the helper serves go.
    pub work: PathBuf,
    /// Short tag for the namespaces' names (unique among labs running at once).
    pub tag: String,
    /// Names the lab's DNS leaves out (a fault: `api-int.<cluster domain>`, say).
    pub drop_dns: Vec<String>,
    /// Faults the lab is started with (`crate::fault`).
    pub faults: Vec<crate::fault::Fault>,
    /// Start the collector with the lab; otherwise `start_collector` does, later.
    pub collector: bool,
    /// The collector's dashboard on the helper's loopback, this port (`Lab::web_get`).
    pub web: Option<u16>,
}

/// A node of the bundle's inventory.
#[derive(Debug, Clone)]
pub struct Machine {
    pub name: String,
    pub role: String,
    pub ip: String,
    pub mac: String,
}

/// A VM of the lab and what it got to.
pub struct Vm {
    pub name: String,
    /// The MAC it boots with (the inventory's, unless a test says otherwise).
    pub mac: String,
    pub started: Instant,
    pub seen: Milestones,
    pub console: PathBuf,
    /// The node's boot the collector knew before this VM powered on (a report of that one is
    /// not this VM's).
    earlier_boot: Option<String>,
    child: Child,
    /// When it was first seen stuck for good (Ignition failed, or no DHCP reservation for it).
    stuck_since: Option<Instant>,
    /// Powered off: it was stuck (`HALT_AFTER`).
    pub halted: bool,
}

/// A VM stuck for good this long is powered off: an emulated CPU spinning in iPXE's DHCP retries
/// or an emergency shell costs the machines still booting a third of a core each. The wait lets
/// the console say why in Ignition's own words first.
const HALT_AFTER: Duration = Duration::from_secs(20);

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Lab {
    pub net: Netns,
    pub machines: Vec<Machine>,
    pub helper: String,
    /// Where the agents report (`ip:port`, from the bundle).
    pub collector_addr: String,
    pub dir: PathBuf,
    pub work: PathBuf,
    /// What the helper's HTTP server serves (the bundle's http_base_url).
    pub www: PathBuf,
    /// "kvm" or "tcg": what runs the VMs.
    pub accel: &'static str,
    pub vms: Vec<Vm>,
    image: PathBuf,
    hardshift: PathBuf,
    collector: Option<u32>,
    web: Option<u16>,
    faults: Vec<crate::fault::Fault>,
}

const HELPER_HOST: &str = "helper";

impl Lab {
    pub fn start(mut o: Options) -> Result<Lab, String> {
        // Absolute paths: dnsmasq changes to / and the servers run in other namespaces.
        for p in [&mut o.dir, &mut o.image, &mut o.hardshift, &mut o.work] {
            *p = std::path::absolute(&*p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        let c = cluster(&o.dir)?;
        let machines = machines(&c);
        let (addrs, http) = helper_addresses(&c)?;
        let www = serve_root(&o, &c, &machines)?;
        let addr_refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
        for ns in crate::netns::reap_stale(&o.tag) {
            eprintln!("boot-lab: removed {ns}, left by a lab that was killed");
        }
        let mut net = Netns::new(&o.tag, &[(HELPER_HOST, &addr_refs)]);
        net.die_with_parent = true;
        let mut lab = Lab {
            net,
            machines,
            helper: c.helper_ip.to_string(),
            collector_addr: format!("{}:{}", c.collector_address, c.collector_port),
            dir: o.dir.clone(),
            work: o.work.clone(),
            www,
            accel: "tcg",
            vms: vec![],
            image: o.image.clone(),
            hardshift: o.hardshift.clone(),
            collector: None,
            web: o.web,
            faults: o.faults.clone(),
        };
        write(&o.work.join("dnsmasq.conf"), dnsmasq_conf(&o, &c.name, &lab.www)?.as_bytes())?;
        let servers = lab.spawn_servers(&o.work, http);
        if o.collector {
            lab.start_collector();
        }
        lab.check_started(servers)?;
        lab.accel = accelerator(&o.work);
        Ok(lab)
    }

    /// The helper's servers, in its namespace: dnsmasq (DHCP and DNS), the HTTP server of the
    /// configs and boot files at `http`, HAProxy. (pid, what, log) of each.
    fn spawn_servers(&mut self, work: &Path, http: (IpAddr, u16)) -> [(u32, &'static str, &'static str); 3] {
        let s = |p: &Path| p.display().to_string();
        // On the command line, what differs on this helper from the generated config: the
        // interface (the namespace's eth0), lease and log files, no /etc/hosts or upstream
        // resolvers, root.
        let dnsmasq = self.net.spawn_logged(
            HELPER_HOST,
            "dnsmasq",
            &[
                "-k".into(),
                format!("--conf-file={}", s(&work.join("dnsmasq.conf"))),
                "--interface=eth0".into(),
                "--bind-interfaces".into(),
                "--no-resolv".into(),
                "--no-hosts".into(),
                "--pid-file=".into(),
                "--user=root".into(),
                "--log-dhcp".into(),
                "--log-facility=-".into(),
                format!("--dhcp-leasefile={}", s(&work.join("leases"))),
            ],
            &[],
            &work.join("dnsmasq.log"),
        );
        let args = [
            "-m",
            "http.server",
            &http.1.to_string(),
            "--bind",
            &http.0.to_string(),
            "--directory",
            &s(&self.www),
        ]
        .map(String::from);
        let server = self.net.spawn_logged(HELPER_HOST, "python3", &args, &[], &work.join("http.log"));
        // The generated HAProxy, in the foreground (-db): api/api-int :6443 and :22623, ingress.
        let cfg = s(&self.dir.join("lab/haproxy/haproxy.cfg"));
        let haproxy = self.net.spawn_logged(
            HELPER_HOST,
            "haproxy",
            &["-db".into(), "-f".into(), cfg],
            &[],
            &work.join("haproxy.log"),
        );
        [
            (dnsmasq, "dnsmasq", "dnsmasq.log"),
            (server, "the HTTP server", "http.log"),
            (haproxy, "haproxy", "haproxy.log"),
        ]
    }

    /// A server that refuses its config or its port stops at once: say which, with its words.
    fn check_started(&mut self, servers: [(u32, &'static str, &'static str); 3]) -> Result<(), String> {
        std::thread::sleep(Duration::from_millis(1500));
        let collector = self.collector.map(|p| (p, "hardshift collector", "collector.log"));
        for (pid, what, log) in servers.into_iter().chain(collector) {
            if let Some(status) = self.net.exited(pid) {
                return Err(format!("{what} stopped at start ({status}):\n{}", tail(&self.work.join(log), 10)));
            }
        }
        Ok(())
    }

    /// `hardshift collector` on the bundle's collector address, in the helper's namespace.
    pub fn start_collector(&mut self) {
        let s = |p: &Path| p.display().to_string();
        let pid = self.net.spawn_logged(
            HELPER_HOST,
            &s(&self.hardshift),
            &[
                "collector".into(),
                "--dir".into(),
                s(&self.dir),
                "--listen".into(),
                self.collector_addr.clone(),
                "--no-api-watch".into(),
            ]
            .into_iter()
            .chain(match self.web {
                Some(port) => vec!["--web".to_string(), format!("127.0.0.1:{port}")],
                None => vec!["--no-web".to_string()],
            })
            .collect::<Vec<_>>(),
            &[],
            &self.work.join("collector.log"),
        );
        self.collector = Some(pid);
    }

    pub fn machine(&self, name: &str) -> Result<&Machine, String> {
        self.machines.iter().find(|m| m.name == name).ok_or_else(|| {
            format!(
                "{name:?} is not a node of this bundle (its nodes: {})",
                self.machines.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// Power on `name`'s VM, with the inventory's MAC unless `mac` is given.
    pub fn boot(&mut self, name: &str, mac: Option<&str>) -> Result<(), String> {
        let m = self.machine(name)?.clone();
        let mac = mac.unwrap_or(&m.mac).to_ascii_lowercase();
        let tap = format!("tap{}", self.vms.len());
        let br = format!("{}-br", self.net.prefix);
        for args in [
            vec!["-n", &br, "tuntap", "add", &tap, "mode", "tap"],
            vec!["-n", &br, "link", "set", &tap, "master", "br0"],
            vec!["-n", &br, "link", "set", &tap, "up"],
        ] {
            let (ok, out) = run("ip", &args);
            if !ok {
                return Err(format!("ip {}: {out}", args.join(" ")));
            }
        }
        let console = self.work.join(format!("{name}.console"));
        let _ = std::fs::remove_file(&console);
        let earlier_boot = self.store().and_then(|st| st.boot_of(name).ok().flatten());
        let mtu = crate::fault::nic_mtu(&self.faults, name);
        let iops = crate::fault::disk_write_iops(&self.faults, name);
        let mut cmd = vm_command(&br, &self.image, self.accel, &tap, name, &mac, (mtu, iops), &console);
        if self.net.die_with_parent {
            crate::netns::die_with_parent(&mut cmd);
        }
        let child = cmd.spawn().map_err(|e| format!("qemu-system-x86_64: {e}"))?;
        self.vms.push(Vm {
            name: name.to_string(),
            mac,
            started: Instant::now(),
            seen: Milestones::default(),
            console,
            earlier_boot,
            child,
            stuck_since: None,
            halted: false,
        });
        Ok(())
    }

    /// Read the lab's logs and the collector's store; note the first time each step is seen.
    pub fn poll(&mut self) {
        let dnsmasq = read_lossy(&self.work.join("dnsmasq.log"));
        let http = read_lossy(&self.work.join("http.log"));
        let store = self.store();
        for vm in &mut self.vms {
            let at = vm.started.elapsed();
            let console = read_lossy(&vm.console);
            let s = &mut vm.seen;
            if s.lease.is_none() && watch::lease(&dnsmasq, &vm.mac).is_some() {
                s.lease = Some(at);
            }
            s.unserved = s.unserved || watch::unserved(&dnsmasq, &vm.mac);
            if s.fetched.is_none() && watch::fetched(&http, &vm.name) {
                s.fetched = Some(at);
            }
            if s.ignition_done.is_none() && watch::ignition_done(&console) {
                s.ignition_done = Some(at);
            }
            // Read again each time: a later line can say better why (Ignition's own words).
            if let Some(f) = watch::failure(&console) {
                s.failed = Some(f);
            }
            // A report of this boot stored (the agent's hello alone names the boot).
            let boot = store.as_ref().and_then(|st| st.boot_of(&vm.name).ok().flatten());
            let stored = |b: &String| store.as_ref().is_some_and(|st| st.seqs(&vm.name, b).is_ok_and(|q| !q.is_empty()));
            if s.report.is_none() && boot.as_ref().is_some_and(|b| Some(b) != vm.earlier_boot.as_ref() && stored(b)) {
                s.report = Some(at);
            }
            if (s.failed.is_some() || (s.unserved && s.lease.is_none())) && !vm.halted {
                let since = *vm.stuck_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= HALT_AFTER {
                    let _ = vm.child.kill();
                    let _ = vm.child.wait();
                    vm.halted = true;
                }
            }
        }
    }

    /// The collector's store, once it exists.
    fn store(&self) -> Option<hardshift_collector::store::Store> {
        let db = self.dir.join("collector/reports.db");
        db.exists().then(|| hardshift_collector::store::Store::open(&db).ok()).flatten()
    }

    /// Poll until `done` holds or `timeout` passes; whether it held.
    pub fn wait_until(&mut self, timeout: Duration, mut done: impl FnMut(&Lab) -> bool) -> bool {
        let start = Instant::now();
        loop {
            self.poll();
            if done(self) {
                return true;
            }
            if start.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    pub fn vm(&self, name: &str) -> &Vm {
        self.vms.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no VM {name}"))
    }

    /// The last thing seen of each VM (`watch::Milestones::last_seen`).
    pub fn last_seen(&self, vm: &Vm) -> String {
        let inventory = self
            .machines
            .iter()
            .find(|m| m.name == vm.name)
            .map(|m| m.mac.as_str())
            .unwrap_or("");
        vm.seen.last_seen(&vm.name, &vm.mac, inventory)
    }

    /// The end of every console and log: what to show when a boot did not go as expected.
    pub fn tails(&self) -> String {
        let mut out = String::new();
        for vm in &self.vms {
            out.push_str(&format!(
                "== {} console ({}):\n{}\n",
                vm.name,
                vm.console.display(),
                tail(&vm.console, 40)
            ));
        }
        for f in ["collector.log", "dnsmasq.log", "http.log", "haproxy.log"] {
            out.push_str(&format!("== {f}:\n{}\n", tail(&self.work.join(f), 20)));
        }
        out
    }

    /// GET `path` from the collector's dashboard (`Options::web`), from inside the helper's
    /// namespace: (whether it answered 200, the body).
    pub fn web_get(&self, path: &str) -> (bool, String) {
        let Some(port) = self.web else {
            return (false, "the lab has no dashboard (Options::web)".into());
        };
        let url = format!("http://127.0.0.1:{port}{path}");
        self.exec(
            "python3",
            &[
                "-c",
                "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                &url,
            ],
        )
    }

    /// A command in the helper's namespace (ssh to a node, dig…).
    pub fn exec(&self, program: &str, args: &[&str]) -> (bool, String) {
        self.net.exec(HELPER_HOST, program, args)
    }
}

/// The helper's addresses on the bridge (its own, the API and ingress VIPs, the collector's and
/// the HTTP server's, each once, with the machine network's prefix), and the HTTP server's
/// address and port.
fn helper_addresses(c: &hardshift_generator::cluster::Cluster) -> Result<(Vec<String>, (IpAddr, u16)), String> {
    let prefix = c
        .machine_networks
        .iter()
        .find(|n| n.contains(&c.helper_ip))
        .map(|n| n.prefix_len())
        .ok_or_else(|| format!("the helper {} is in no machine network", c.helper_ip))?;
    let (http_ip, http_port) = http_endpoint(&c.lab.http_base_url)?;
    let collector_ip: IpAddr = c.collector_address.parse().map_err(|_| {
        format!(
            "collector.address {:?} is a name: the boot lab puts the collector on the helper's bridge and needs an IP",
            c.collector_address
        )
    })?;
    let mut addrs: Vec<String> = Vec::new();
    for ip in [c.helper_ip, c.api_vip, c.ingress_vip, collector_ip, http_ip] {
        let a = format!("{ip}/{prefix}");
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    }
    Ok((addrs, (http_ip, http_port)))
}

/// WORK/www/, what the helper's HTTP server serves: each machine's Ignition config, the iPXE
/// script for the test image, its kernel and initramfs, and what the bundle says to serve from
/// the helper (the agent for --agent-url).
fn serve_root(o: &Options, c: &hardshift_generator::cluster::Cluster, machines: &[Machine]) -> Result<PathBuf, String> {
    let www = o.work.join("www");
    for f in ["ignition", "pxe", "image", "tftp"] {
        let p = www.join(f);
        hardshift_generator::fsio::make_dir_all(&p, 0o755).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    for m in machines {
        let src = o.dir.join(format!("ignition/{}.ign", m.name));
        std::fs::copy(&src, www.join(format!("ignition/{}.ign", m.name))).map_err(|e| format!("{}: {e}", src.display()))?;
    }
    let ipxe = read_text(&o.dir.join("lab/pxe/boot.ipxe"))?;
    write(&www.join("pxe/boot.ipxe"), ipxe_for_image(&ipxe, &c.lab.http_base_url)?.as_bytes())?;
    for f in ["vmlinuz", "initramfs.img"] {
        link(&o.image.join(f), &www.join("image").join(f))?;
    }
    if let Ok(entries) = std::fs::read_dir(o.dir.join("http")) {
        for e in entries.flatten() {
            link(&e.path(), &www.join(e.file_name()))?;
        }
    }
    Ok(www)
}

/// The generated DHCP config, as is but for its TFTP root (the iPXE ROM asks for the script over
/// HTTP at once, so TFTP serves nothing); the generated DNS config beside it, less any name the
/// caller drops, with the lab's faults applied.
fn dnsmasq_conf(o: &Options, cluster: &str, www: &Path) -> Result<String, String> {
    let dns_dir = o.dir.join("lab/dnsmasq");
    let dhcp = read_text(&dns_dir.join(format!("{cluster}-dhcp.conf")))?;
    let dhcp = replace_line(&dhcp, "tftp-root=", &format!("tftp-root={}", www.join("tftp").display()));
    let dns = read_text(&dns_dir.join(format!("{cluster}-dns.conf")))?;
    let dropped = |l: &str| {
        o.drop_dns
            .iter()
            .any(|n| l.contains(&format!("/{n}/")) || l.contains(&format!("={n},")))
    };
    let dns: String = dns.lines().filter(|l| !dropped(l)).map(|l| format!("{l}\n")).collect();
    let dns = crate::fault::apply_dns(&dns, &o.faults)?;
    Ok(format!("{dhcp}{dns}"))
}

fn read_text(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// The bundle's cluster, from its inputs.
fn cluster(dir: &Path) -> Result<hardshift_generator::cluster::Cluster, String> {
    let sources = hardshift_generator::config::read_sources(dir, None).map_err(|e| format!("{}: {e}", dir.display()))?;
    hardshift_generator::config::build(&sources, &Default::default()).map_err(|e| format!("{}: {e}", dir.display()))
}

fn machines(c: &hardshift_generator::cluster::Cluster) -> Vec<Machine> {
    c.nodes
        .iter()
        .map(|n| Machine {
            name: n.hostname.clone(),
            role: n.role.as_str().to_string(),
            ip: n.ip.to_string(),
            mac: n.mac.to_ascii_lowercase(),
        })
        .collect()
}

/// The nodes of the bundle in `dir` (its inventory), read without starting anything.
pub fn inventory(dir: &Path) -> Result<Vec<Machine>, String> {
    Ok(machines(&cluster(dir)?))
}

/// `names` as nodes to boot: each once, each in `machines`; else what is wrong, naming the nodes.
pub fn check_nodes(names: &[String], machines: &[Machine]) -> Result<(), String> {
    let known = || machines.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ");
    for (i, n) in names.iter().enumerate() {
        if !machines.iter().any(|m| &m.name == n) {
            return Err(format!("--nodes: {n:?} is not a node of this bundle (its nodes: {})", known()));
        }
        if names[..i].contains(n) {
            return Err(format!("--nodes: {n} is named twice (one VM per node: its MAC is the inventory's)"));
        }
    }
    Ok(())
}

/// `http://IP:PORT[/…]` → (IP, PORT): the helper address the HTTP server binds.
fn http_endpoint(url: &str) -> Result<(IpAddr, u16), String> {
    let bad = || format!("lab.httpBaseURL {url:?}: the boot lab serves it on the helper's bridge and needs http://IP[:PORT]");
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let host = rest.split('/').next().unwrap_or_default();
    let (ip, port) = match host.rsplit_once(':') {
        Some((ip, port)) => (ip, port.parse().map_err(|_| bad())?),
        None => (host, 80),
    };
    Ok((ip.parse().map_err(|_| bad())?, port))
}

/// The generated iPXE script with the test image in place of RHCOS's live images: the kernel and
/// initramfs come from the image; `coreos.live.rootfs_url` and `coreos.inst.install_dev` go (no
/// installer: the disk is ready, so the live rootfs is not fetched and Ignition runs on the disk's
/// first boot, not the installed system's); the node's `coreos.inst.ignition_url` becomes
/// `ignition.config.url`; the rest (the static `ip=`, `nameserver=`, consoles) is the bundle's.
/// Added: the root disk, Ignition's first-boot flags, journal errors on the serial console.
/// Not on this machine, unlike RHCOS: rpm-ostree, SELinux, the kubelet and CRI-O; Debian's
/// Ignition is 2.14 (config spec up to 3.3.0).
pub fn ipxe_for_image(generated: &str, base: &str) -> Result<String, String> {
    let mut kernels = 0;
    let out: Vec<String> = generated
        .lines()
        .map(|l| {
            if let Some(args) = l.strip_prefix("kernel ") {
                kernels += 1;
                let mut a = vec![format!("kernel {base}/image/vmlinuz")];
                for w in args.split_whitespace().skip(1) {
                    if w.starts_with("coreos.live.rootfs_url=") || w.starts_with("coreos.inst.install_dev=") {
                        continue;
                    }
                    match w.strip_prefix("coreos.inst.ignition_url=") {
                        Some(url) => a.push(format!("ignition.config.url={url}")),
                        None => a.push(w.to_string()),
                    }
                }
                a.push("root=LABEL=root rw rd.neednet=1 ignition.firstboot ignition.platform.id=metal".into());
                a.push("systemd.journald.forward_to_console=1 systemd.journald.max_level_console=err".into());
                a.join(" ")
            } else if l.starts_with("initrd ") {
                format!("initrd --name main {base}/image/initramfs.img")
            } else {
                l.to_string()
            }
        })
        .collect();
    if kernels == 0 {
        return Err(format!("no kernel line in the bundle's boot.ipxe:\n{generated}"));
    }
    if out.iter().any(|l| l.contains("rhcos")) {
        return Err(format!("RHCOS left in the iPXE script:\n{}", out.join("\n")));
    }
    Ok(out.join("\n") + "\n")
}

/// A VM booting from its NIC (the iPXE ROM), on a tap of the lab bridge. q35 with the NIC behind a
/// PCIe root port, as libvirt lays it out: the guest names it enp1s0, the name the bundle's
/// keyfile and `ip=` use. The disk is the image, written through a throw-away overlay. `faults`:
/// the NIC's MTU and the disk's write operations a second, when a fault sets them.
#[allow(clippy::too_many_arguments)]
fn vm_command(
    br: &str,
    image: &Path,
    accel: &str,
    tap: &str,
    name: &str,
    mac: &str,
    faults: (Option<u32>, Option<u32>),
    console: &Path,
) -> Command {
    let (mtu, iops) = faults;
    let cpu = if accel == "kvm" { "host" } else { "max" };
    let accel = if accel == "kvm" { "kvm" } else { "tcg,tb-size=256" };
    let mut disk = format!("if=none,id=d0,format=raw,snapshot=on,file={}", image.join("disk.raw").display());
    // QEMU's block throttling: a steady rate, no burst (a burst would let a short probe through).
    if let Some(n) = iops {
        disk.push_str(&format!(",throttling.iops-write={n}"));
    }
    // host_mtu: the virtio NIC tells the guest its MTU (VIRTIO_NET_F_MTU), which the driver sets.
    let mtu = mtu.map(|m| format!(",host_mtu={m}")).unwrap_or_default();
    let mut c = Command::new("ip");
    c.args(["netns", "exec", br, "qemu-system-x86_64", "-nodefaults", "-name", name])
        .args(["-machine", "q35", "-accel", accel, "-cpu", cpu, "-m", "512", "-smp", "1"])
        .args(["-display", "none", "-serial", &format!("file:{}", console.display())])
        .args(["-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1"])
        .args(["-netdev", &format!("tap,id=n0,ifname={tap},script=no,downscript=no")])
        .args(["-device", &format!("virtio-net-pci,bus=rp1,netdev=n0,mac={mac},bootindex=1{mtu}")])
        .args(["-drive", &disk, "-device", "virtio-blk-pci,drive=d0", "-device", "virtio-rng-pci"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// KVM when it runs the VMs' firmware, else TCG (slower, same result). /dev/kvm is not enough: under
/// nested virtualisation KVM may fail in the iPXE ROM's real-mode code ("KVM internal error ...
/// emulation failure") and the VM stops there. So the probe runs that ROM until it sends its
/// first DHCP packet (captured to a file), it fails, or 30 s pass.
pub fn accelerator(scratch: &Path) -> &'static str {
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
        return "tcg";
    }
    let (pcap, log) = (scratch.join("kvm-probe.pcap"), scratch.join("kvm-probe.log"));
    let Ok(err_file) = std::fs::File::create(&log) else { return "tcg" };
    let Ok(mut probe) = Command::new("qemu-system-x86_64")
        .args([
            "-nodefaults",
            "-machine",
            "q35",
            "-accel",
            "kvm",
            "-cpu",
            "host",
            "-m",
            "128",
            "-display",
            "none",
        ])
        .args(["-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0", "-boot", "n"])
        .args(["-object", &format!("filter-dump,id=f0,netdev=n0,file={}", pcap.display())])
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
    else {
        return "tcg";
    };
    let start = Instant::now();
    let ok = loop {
        // A pcap file is a 24-byte header, then packets.
        if std::fs::metadata(&pcap).map(|m| m.len() > 24).unwrap_or(false) {
            break true;
        }
        let err = read_lossy(&log);
        if !err.is_empty() || probe.try_wait().ok().flatten().is_some() || start.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "boot-lab: KVM does not run the firmware here ({}): TCG",
                err.lines().next().unwrap_or("no packet")
            );
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = probe.kill();
    let _ = probe.wait();
    if ok {
        "kvm"
    } else {
        "tcg"
    }
}

fn replace_line(text: &str, prefix: &str, with: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with(prefix) {
                format!("{with}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

fn write(p: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(p, bytes).map_err(|e| format!("{}: {e}", p.display()))
}

fn link(from: &Path, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(to);
    std::os::unix::fs::symlink(from, to).map_err(|e| format!("{} → {}: {e}", to.display(), from.display()))
}

pub fn read_lossy(p: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).to_string()
}

/// The last `n` lines of a file.
pub fn tail(p: &Path, n: usize) -> String {
    let s = read_lossy(p);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_endpoint_is_an_ip_and_port() {
        assert_eq!(
            http_endpoint("http://192.168.126.1:8080").unwrap(),
            ("192.168.126.1".parse().unwrap(), 8080)
        );
        assert_eq!(http_endpoint("http://10.0.0.1/x").unwrap().1, 80);
        assert!(http_endpoint("https://10.0.0.1").is_err());
        assert!(http_endpoint("http://helper.lab:8080").is_err());
    }

    #[test]
    fn the_ipxe_script_boots_the_image_with_the_bundles_arguments() {
        let gen = "#!ipxe\nkernel http://h:8080/rhcos-kernel initrd=main coreos.live.rootfs_url=http://h:8080/rhcos-rootfs.img coreos.inst.install_dev=/dev/vda coreos.inst.ignition_url=http://h:8080/ignition/m.ign ip=192.168.126.101::192.168.126.1:255.255.255.0:m:enp1s0:none nameserver=192.168.126.1\ninitrd --name main http://h:8080/rhcos-initramfs.img\nboot\n";
        let out = ipxe_for_image(gen, "http://h:8080").unwrap();
        assert!(
            out.contains(
                "kernel http://h:8080/image/vmlinuz initrd=main ignition.config.url=http://h:8080/ignition/m.ign ip=192.168.126.101::"
            ),
            "{out}"
        );
        assert!(out.contains("initrd --name main http://h:8080/image/initramfs.img"), "{out}");
        assert!(!out.contains("rootfs") && !out.contains("install_dev"), "{out}");
        assert!(ipxe_for_image("#!ipxe\nboot\n", "x").is_err());
    }
}
