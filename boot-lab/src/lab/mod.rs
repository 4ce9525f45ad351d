//! A bundle's lab, live, on a private bridge in network namespaces: the helper's addresses (its
//! own, the API and ingress VIPs, the collector's), where `hardshift lab serve` runs the helper
//! (the bundle's dnsmasq and HAProxy, the boot files over HTTP, every boot step an event), and
//! `hardshift collector`; and VMs that PXE-boot the test image through it with the inventory's
//! MACs. The lab hands `lab serve` the bundle as it serves it (`served_bundle`: its faults, the
//! test image), so the helper is the one users run.
//!
//! What differs from a real RHCOS PXE boot is said in `ipxe_for_image`.

use anyhow::Context;
mod files;
mod helper;
mod parts;
mod qemu;

pub use files::{read_lossy, tail};
pub use helper::ipxe_for_image;
pub use parts::{Machine, Options};
pub use qemu::accelerator;

use crate::netns::{run, Netns};
use crate::watch::{self, Milestones};
use hardshift_bundle::Inventory;
use helper::{helper_addresses, served_bundle};
use qemu::{vm_command, Disks};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

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
    /// How it boots now: the image (the node's config applied to it), its live system, or its
    /// installed disk.
    pub stage: VmStage,
    /// Its installation disk (a file of the work directory), when it boots a live system.
    target: Option<PathBuf>,
    /// The installed system's kernel arguments (the node's `ip=` from the bundle's boot script).
    installed_append: String,
    tap: String,
    /// Its firmware boots the network before the disk (`live-again:NODE`): after the install, the
    /// live system again.
    net_first: bool,
}

/// What a VM boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmStage {
    /// The image, with the node's config (`lab.liveAgent: false`).
    Image,
    /// The live system, whose agent writes the installation disk; the count of live boots.
    Live(u32),
    /// The installation disk, as written.
    Installed,
}

impl Vm {
    /// The CPU time its QEMU has had (user and system), if it still runs: how far an emulated
    /// guest has got, whatever the machine's load.
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the command's closing parenthesis: state is the 3rd, utime the 14th.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??.max(1) as u64;
        Some(Duration::from_millis(ticks * 1000 / hz))
    }
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
    /// The bundle as the helper serves it (`lab serve --dir`): `ignition/`, `http/`, `lab/`.
    pub www: PathBuf,
    /// The collector's store, where the helper's boot events go too.
    db: PathBuf,
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
/// `lab serve`'s output (what it refused, its requests) in the work directory.
const SERVE_LOG: &str = "serve.log";

impl Lab {
    pub fn start(mut o: Options) -> anyhow::Result<Lab> {
        // Absolute paths: dnsmasq changes to / and the servers run in other namespaces.
        for p in [&mut o.dir, &mut o.image, &mut o.hardshift, &mut o.work] {
            *p = std::path::absolute(&*p).with_context(|| p.display().to_string())?;
        }
        let c = cluster(&o.dir)?;
        let machines = machines(&c);
        let (addrs, _) = helper_addresses(&c)?;
        let (www, rhcos) = served_bundle(&o, &c, &machines)?;
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
            db: o.dir.join(hardshift_bundle::layout::REPORTS_DB),
            accel: "tcg",
            vms: vec![],
            image: o.image.clone(),
            hardshift: o.hardshift.clone(),
            collector: None,
            web: o.web,
            faults: o.faults.clone(),
        };
        let helper = lab.spawn_helper(&rhcos);
        if o.collector {
            lab.start_collector();
        }
        lab.check_started(helper)?;
        lab.accel = accelerator(&o.work);
        Ok(lab)
    }

    /// The helper, in its namespace: `hardshift lab serve` on the served bundle, on the
    /// namespace's eth0, its boot events into the collector's store (the collector runs apart,
    /// `start_collector`). Its PID.
    fn spawn_helper(&mut self, rhcos: &Path) -> u32 {
        let s = |p: &Path| p.display().to_string();
        self.net.spawn_logged(
            HELPER_HOST,
            &s(&self.hardshift),
            &[
                "lab".into(),
                "serve".into(),
                "--dir".into(),
                s(&self.www),
                "--rhcos".into(),
                s(rhcos),
                "--interface".into(),
                "eth0".into(),
                "--no-collector".into(),
                "--db".into(),
                s(&self.db),
            ],
            &[],
            &self.work.join(SERVE_LOG),
        )
    }

    /// The helper refuses what it cannot serve (a port, a file) before it starts anything: wait
    /// for it to say it serves, or say why it stopped, in its words. The collector, once started,
    /// must not stop at once either.
    fn check_started(&mut self, helper: u32) -> anyhow::Result<()> {
        let log = self.work.join(SERVE_LOG);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !read_lossy(&log).contains("lab serve: DHCP, DNS and TFTP on") {
            if let Some(status) = self.net.exited(helper) {
                return Err(anyhow::anyhow!("lab serve stopped at start ({status}):\n{}", tail(&log, 20)));
            }
            if Instant::now() > deadline {
                return Err(anyhow::anyhow!("lab serve did not start serving within 60 s:\n{}", tail(&log, 20)));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(500));
        if let Some(pid) = self.collector {
            if let Some(status) = self.net.exited(pid) {
                return Err(anyhow::anyhow!(
                    "hardshift collector stopped at start ({status}):\n{}",
                    tail(&self.work.join("collector.log"), 10)
                ));
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

    pub fn machine(&self, name: &str) -> anyhow::Result<&Machine> {
        self.machines.iter().find(|m| m.name == name).ok_or_else(|| {
            anyhow::anyhow!(
                "{name:?} is not a node of this bundle (its nodes: {})",
                self.machines.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// Power on `name`'s VM, with the inventory's MAC unless `mac` is given. A node whose boot
    /// script boots a live config (`live/NODE.ign`) boots its live system with a blank
    /// installation disk; `disk-first:NODE` boots that disk instead (firmware that tries the disk
    /// first: it never asks the network).
    pub fn boot(&mut self, name: &str, mac: Option<&str>) -> anyhow::Result<()> {
        let m = self.machine(name)?.clone();
        let mac = mac.unwrap_or(&m.mac).to_ascii_lowercase();
        let tap = format!("tap{}", self.vms.len());
        let br = format!("{}-br", self.net.prefix);
        let ipxe = read_lossy(&self.www.join("lab/pxe/boot.ipxe"));
        let live = ipxe.contains(&format!("/live/{name}.ign"));
        let target = live.then(|| self.work.join(format!("{name}.disk")));
        if let Some(t) = &target {
            // A blank disk: the firmware finds nothing to boot on it and tries the network.
            let _ = std::fs::remove_file(t);
            let f = std::fs::File::create(t).with_context(|| t.display().to_string())?;
            f.set_len(TARGET_BYTES).with_context(|| t.display().to_string())?;
        }
        let installed_append = installed_append(&ipxe, name);
        let disk_first = self.faults.contains(&crate::fault::Fault::DiskFirst(name.to_string()));
        let stage = match (live, disk_first) {
            (false, _) => VmStage::Image,
            (true, false) => VmStage::Live(1),
            (true, true) => VmStage::Installed,
        };
        for args in [
            vec!["-n", &br, "tuntap", "add", &tap, "mode", "tap"],
            vec!["-n", &br, "link", "set", &tap, "master", "br0"],
            vec!["-n", &br, "link", "set", &tap, "up"],
        ] {
            let (ok, out) = run("ip", &args);
            if !ok {
                return Err(anyhow::anyhow!("ip {}: {out}", args.join(" ")));
            }
        }
        let console = self.work.join(format!("{name}.console"));
        let _ = std::fs::remove_file(&console);
        let earlier_boot = self.store().and_then(|st| st.boot_of(name).ok().flatten());
        let mut vm = Vm {
            name: name.to_string(),
            mac,
            started: Instant::now(),
            seen: Milestones::default(),
            console,
            earlier_boot,
            child: std::process::Command::new("true").spawn().context("true")?,
            stuck_since: None,
            halted: false,
            stage,
            target,
            installed_append,
            tap,
            net_first: self.faults.contains(&crate::fault::Fault::LiveAgain(name.to_string())),
        };
        let _ = vm.child.wait();
        vm.child = self.launch(&vm)?;
        self.vms.push(vm);
        Ok(())
    }

    /// `vm`'s QEMU, for the stage it is at.
    fn launch(&self, vm: &Vm) -> anyhow::Result<Child> {
        let br = format!("{}-br", self.net.prefix);
        let mtu = crate::fault::nic_mtu(&self.faults, &vm.name);
        let iops = crate::fault::disk_write_iops(&self.faults, &vm.name);
        let disks = match (vm.stage, &vm.target) {
            (VmStage::Live(_), Some(target)) => Disks::Live { target },
            (VmStage::Installed, Some(target)) => Disks::Installed {
                target,
                append: &vm.installed_append,
            },
            _ => Disks::Image,
        };
        let mut cmd = vm_command(
            &br,
            &self.image,
            self.accel,
            &vm.tap,
            &vm.name,
            &vm.mac,
            (mtu, iops),
            &vm.console,
            disks,
        );
        if self.net.die_with_parent {
            crate::netns::die_with_parent(&mut cmd);
        }
        cmd.spawn().context("qemu-system-x86_64")
    }

    /// A live system that rebooted (its QEMU ended, `-no-reboot`) boots again as its firmware
    /// would: its written disk, or (`live-again:NODE`) the network once more.
    fn after_reboot(&mut self, i: usize) {
        let vm = &mut self.vms[i];
        let VmStage::Live(n) = vm.stage else { return };
        if vm.halted || !matches!(vm.child.try_wait(), Ok(Some(_))) {
            return;
        }
        vm.seen.rebooted.get_or_insert(vm.started.elapsed());
        // Each boot's reports are its own: the installed system's first report is a new boot's.
        vm.stage = if vm.net_first && n < 2 {
            VmStage::Live(n + 1)
        } else {
            VmStage::Installed
        };
        if vm.net_first && n >= 2 {
            // The firmware would PXE again and again; twice shows it.
            vm.halted = true;
            return;
        }
        match self.launch(&self.vms[i]) {
            Ok(child) => self.vms[i].child = child,
            Err(e) => {
                eprintln!("boot-lab: {}: {e:#}", self.vms[i].name);
                self.vms[i].halted = true;
            }
        }
    }

    /// Read the lab's logs and the collector's store; note the first time each step is seen.
    pub fn poll(&mut self) {
        for i in 0..self.vms.len() {
            self.after_reboot(i);
        }
        let store = self.store();
        let events = store.as_ref().and_then(|st| st.boot_events(None).ok()).unwrap_or_default();
        for vm in &mut self.vms {
            let at = vm.started.elapsed();
            let console = read_lossy(&vm.console);
            let s = &mut vm.seen;
            if s.lease.is_none() && watch::lease(&events, &vm.mac).is_some() {
                s.lease = Some(at);
            }
            s.unserved = s.unserved || watch::unserved(&events, &vm.mac);
            if s.fetched.is_none() && watch::fetched(&events, &vm.name) {
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
            let new_boot = boot.as_ref().is_some_and(|b| Some(b) != vm.earlier_boot.as_ref() && stored(b));
            match vm.stage {
                // The live system's agent: its report is not the installed system's.
                VmStage::Live(_) if new_boot => {
                    s.live_report.get_or_insert(at);
                    vm.earlier_boot = boot.clone();
                }
                VmStage::Live(_) => {}
                _ if new_boot && s.report.is_none() => s.report = Some(at),
                _ => {}
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
        self.db
            .exists()
            .then(|| hardshift_collector::store::Store::open(&self.db).ok())
            .flatten()
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

    /// `wait_until`, with a deadline in the VM's own progress rather than the wall clock: it fails
    /// once `name`'s QEMU has had `cpu_budget` of CPU time (an emulated guest under TCG advances
    /// only as its QEMU runs: on a machine loaded by a parallel build the same boot takes several
    /// times the wall time) or `wall_cap` has passed, whichever comes first.
    pub fn wait_until_progress(
        &mut self,
        name: &str,
        cpu_budget: Duration,
        wall_cap: Duration,
        mut done: impl FnMut(&Lab) -> bool,
    ) -> bool {
        let start = Instant::now();
        let cpu0 = self.vm(name).cpu_time();
        loop {
            self.poll();
            if done(self) {
                return true;
            }
            let used = self.vm(name).cpu_time().zip(cpu0).map(|(now, then)| now.saturating_sub(then));
            if start.elapsed() > wall_cap || used.is_some_and(|u| u > cpu_budget) {
                eprintln!(
                    "boot-lab: gave up waiting on {name} after {:.0?} ({:.0?} of its QEMU's CPU time)",
                    start.elapsed(),
                    used.unwrap_or_default()
                );
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
        let helper = self.www.join(".hardshift/helper");
        for f in [
            self.work.join("collector.log"),
            self.work.join(SERVE_LOG),
            helper.join("dnsmasq.log"),
            helper.join("haproxy.log"),
        ] {
            out.push_str(&format!("== {}:\n{}\n", f.display(), tail(&f, 20)));
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

/// The size of a VM's installation disk (sparse): the metal image's 1.1 GiB and room.
const TARGET_BYTES: u64 = 3 << 30;

/// The installed system's kernel arguments, as the firmware's boot of the disk would give them:
/// the disk's root, Ignition's first boot with the config coreos-installer wrote to the boot
/// partition (`hardshift.boot_config`: the image's initramfs reads it there), and the node's
/// static network from the bundle's boot script (`ip=`, `nameserver=`).
pub fn installed_append(ipxe: &str, name: &str) -> String {
    let live = format!("/live/{name}.ign");
    let net: Vec<&str> = ipxe
        .lines()
        .find(|l| l.starts_with("kernel ") && l.contains(&live))
        .map(|l| {
            l.split_whitespace()
                .filter(|w| w.starts_with("ip=") || w.starts_with("nameserver="))
                .collect()
        })
        .unwrap_or_default();
    let mut a = vec![
        "root=LABEL=root rw rd.neednet=1 ignition.firstboot ignition.platform.id=metal hardshift.boot_config",
        "console=ttyS0 systemd.journald.forward_to_console=1 systemd.journald.max_level_console=err",
    ];
    a.extend(net);
    a.join(" ")
}

/// The bundle's inventory, as `create` wrote it.
fn cluster(dir: &Path) -> anyhow::Result<Inventory> {
    Ok(Inventory::load(dir)?)
}

fn machines(c: &Inventory) -> Vec<Machine> {
    c.nodes
        .iter()
        .map(|n| Machine {
            name: n.name.clone(),
            role: n.role.as_str().to_string(),
            ip: n.ip.to_string(),
            mac: n.mac.to_ascii_lowercase(),
        })
        .collect()
}

/// The nodes of the bundle in `dir` (its inventory), read without starting anything.
pub fn inventory(dir: &Path) -> anyhow::Result<Vec<Machine>> {
    Ok(machines(&cluster(dir)?))
}

/// `names` as nodes to boot: each once, each in `machines`; else what is wrong, naming the nodes.
pub fn check_nodes(names: &[String], machines: &[Machine]) -> anyhow::Result<()> {
    let known = || machines.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ");
    for (i, n) in names.iter().enumerate() {
        if !machines.iter().any(|m| &m.name == n) {
            return Err(anyhow::anyhow!(
                "--nodes: {n:?} is not a node of this bundle (its nodes: {})",
                known()
            ));
        }
        if names[..i].contains(n) {
            return Err(anyhow::anyhow!(
                "--nodes: {n} is named twice (one VM per node: its MAC is the inventory's)"
            ));
        }
    }
    Ok(())
}
