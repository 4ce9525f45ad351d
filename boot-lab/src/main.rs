//! `hardshift-boot-lab` (run by hack/boot-lab.sh): boot nodes of a bundle through the bundle's own
//! lab and wait until each reports. Exit 0 when every node reported; 1 naming who did not and the
//! last thing seen of it; 2 on bad arguments.

use anyhow::Context;
mod progress;

use clap::Parser;
use hardshift_boot_lab::lab::{self, Lab, Options};
use hardshift_boot_lab::workdir;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by SIGINT, SIGTERM or SIGHUP: stop waiting, and stop every VM and server on the way out.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn catch_signals() -> anyhow::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(SigHandler::Handler(on_signal), SaFlags::empty(), SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { sigaction(sig, &action) }.with_context(|| format!("sigaction {sig}"))?;
    }
    Ok(())
}

#[derive(Parser)]
#[command(
    version,
    about = "Boot nodes of a bundle under QEMU through its own lab (needs root), and wait for their reports"
)]
struct Args {
    /// The bundle (`hardshift create` has run).
    #[arg(long)]
    dir: PathBuf,
    /// Nodes to boot, by hostname: bootstrap,master-0.
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    /// The machine image (hack/boot-image.sh prints its directory).
    #[arg(long)]
    image: PathBuf,
    /// The hardshift binary whose collector receives the reports.
    #[arg(long)]
    hardshift: PathBuf,
    /// Seconds to wait for every report.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Logs, consoles and what the helper serves (default: DIR/boot-lab): a new or empty directory,
    /// or one an earlier run made (marked with .hardshift-boot-lab), emptied first.
    #[arg(long)]
    work: Option<PathBuf>,
    /// A fault to start the lab with, NAME[:NODE] (repeatable): dns-wildcard, no-ptr:NODE, mtu:NODE,
    /// slow-disk:NODE, no-default-route:NODE.
    #[arg(long = "fault", value_name = "NAME[:NODE]")]
    faults: Vec<hardshift_boot_lab::fault::Fault>,
    /// Keep the lab and its VMs up this many seconds after the first reports (`forever`: until
    /// Ctrl-C): the machines' probes report what they find a round later.
    #[arg(long, value_name = "SECONDS|forever", value_parser = parse_hold)]
    hold: Option<Duration>,
}

/// `--hold`: seconds, or `forever` (until Ctrl-C).
fn parse_hold(s: &str) -> anyhow::Result<Duration> {
    match s {
        "forever" => Ok(Duration::MAX),
        _ => s
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| anyhow::anyhow!("{s:?}: seconds (e.g. 300) or `forever`")),
    }
}

fn main() {
    let a = Args::parse();
    std::process::exit(match run(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    });
}

fn secs(d: Option<Duration>) -> String {
    d.map(|d| format!("{:.1}s", d.as_secs_f64())).unwrap_or_else(|| "-".into())
}

/// Every argument, checked before anything is made, started or removed: the work directory (only
/// one the tool made is ever emptied), the nodes against the bundle's inventory, the image.
fn check(a: &Args) -> anyhow::Result<PathBuf> {
    let machines = lab::inventory(&a.dir)?;
    lab::check_nodes(&a.nodes, &machines)?;
    for f in &a.faults {
        if let Some(n) = f.node().filter(|n| !machines.iter().any(|m| m.name == *n)) {
            let nodes: Vec<&str> = machines.iter().map(|m| m.name.as_str()).collect();
            return Err(anyhow::anyhow!(
                "--fault {f}: {n} is not a node of this bundle (its nodes: {})",
                nodes.join(", ")
            ));
        }
    }
    for n in &a.nodes {
        let ign = a.dir.join(format!("ignition/{n}.ign"));
        if !ign.is_file() {
            return Err(anyhow::anyhow!(
                "{}: no Ignition config for {n} (run `hardshift create --dir {}` first)",
                ign.display(),
                a.dir.display()
            ));
        }
    }
    for f in ["vmlinuz", "initramfs.img", "disk.raw"] {
        if !a.image.join(f).is_file() {
            return Err(anyhow::anyhow!(
                "--image {}: no {f} (hack/boot-image.sh prints the directory to give)",
                a.image.display()
            ));
        }
    }
    if !a.hardshift.is_file() {
        return Err(anyhow::anyhow!("--hardshift {}: no such file", a.hardshift.display()));
    }
    if a.timeout == 0 {
        return Err(anyhow::anyhow!("--timeout must be at least 1 (seconds)"));
    }
    let work = a.work.clone().unwrap_or_else(|| a.dir.join("boot-lab"));
    workdir::check(&work)?;
    Ok(work)
}

fn run(a: Args) -> anyhow::Result<i32> {
    let work = check(&a)?;
    if !nix_is_root() {
        return Err(anyhow::anyhow!(
            "the boot lab needs root (network namespaces, taps, dnsmasq on port 67)"
        ));
    }
    catch_signals()?;
    workdir::prepare(&work)?;
    let mut lab = Lab::start(Options {
        dir: a.dir.clone(),
        image: a.image.clone(),
        hardshift: a.hardshift.clone(),
        work: work.clone(),
        tag: "bl".into(),
        drop_dns: vec![],
        faults: a.faults.clone(),
        collector: true,
        web: None,
    })?;
    eprintln!(
        "boot-lab: {} lab up ({}); booting {} under {}",
        a.dir.display(),
        work.display(),
        a.nodes.join(", "),
        lab.accel
    );
    for n in &a.nodes {
        lab.boot(n, None)?;
    }
    let (all, bars) = watch(&mut lab, &a.nodes, a.timeout);
    bars.finish();
    if STOP.load(Ordering::SeqCst) {
        eprintln!("boot-lab: interrupted: stopping every VM and server");
        drop(lab);
        return Ok(130);
    }
    if !all {
        eprintln!("boot-lab: {}s passed (--timeout)", a.timeout);
    }
    print_table(&lab);
    let status = std::process::Command::new(&a.hardshift)
        .args(["status", "--dir"])
        .arg(&a.dir)
        .output()
        .with_context(|| a.hardshift.display().to_string())?;
    println!("\n{}", String::from_utf8_lossy(&status.stdout));
    match a.hold {
        Some(hold) if !STOP.load(Ordering::SeqCst) => {
            let how = if hold == Duration::MAX {
                "until Ctrl-C".to_string()
            } else {
                format!("for {} s (Ctrl-C ends it sooner)", hold.as_secs())
            };
            eprintln!(
                "boot-lab: holding the lab up {how}: `{} diagnose NODE --dir {}` meanwhile sees each later round",
                a.hardshift.display(),
                a.dir.display()
            );
            lab.wait_until(hold, |_| STOP.load(Ordering::SeqCst));
            eprintln!("boot-lab: hold over: stopping every VM and server");
        }
        _ => eprintln!(
            "boot-lab: the lab stops now: what the machines' probes find a round after the first report (DNS, PTR, routes, peers) needs --hold SECONDS to reach the collector"
        ),
    }
    Ok(verdict(&lab, &work))
}

/// Show each step as it is first seen (a bar per node on a terminal, a line otherwise) until every
/// node reported or failed for good, Ctrl-C, or `timeout` seconds; true when every node did.
fn watch(lab: &mut Lab, nodes: &[String], timeout: u64) -> (bool, progress::Bars) {
    let mut shown: Vec<String> = vec![String::new(); nodes.len()];
    let bars = progress::Bars::new(nodes);
    let all = lab.wait_until(Duration::from_secs(timeout), |lab| {
        for (i, vm) in lab.vms.iter().enumerate() {
            let now = lab.last_seen(vm);
            bars.show(i, progress::steps_done(&vm.seen), &now);
            if now != shown[i] {
                if !bars.drawn() {
                    eprintln!("boot-lab: {} at {:.0}s: {now}", vm.name, vm.started.elapsed().as_secs_f64());
                }
                shown[i] = now;
            }
        }
        STOP.load(Ordering::SeqCst) || lab.vms.iter().all(|v| v.seen.report.is_some() || v.seen.failed.is_some())
    });
    (all, bars)
}

/// When each node got its lease, its live system reported (the live install), it rebooted into
/// the written disk, it fetched and applied its config, and first reported.
fn print_table(lab: &Lab) {
    println!(
        "{:<14} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}  LAST SEEN",
        "NODE", "LEASE", "LIVE", "REBOOTED", "FETCHED", "IGNITION", "REPORT"
    );
    for vm in &lab.vms {
        let s = &vm.seen;
        println!(
            "{:<14} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}  {}",
            vm.name,
            secs(s.lease),
            secs(s.live_report),
            secs(s.rebooted),
            secs(s.fetched),
            secs(s.ignition_done),
            secs(s.report),
            lab.last_seen(vm)
        );
    }
}

/// Exit 0 when every node reported, else 1 naming those that did not.
fn verdict(lab: &Lab, work: &std::path::Path) -> i32 {
    let missing: Vec<&str> = lab
        .vms
        .iter()
        .filter(|v| v.seen.report.is_none())
        .map(|v| v.name.as_str())
        .collect();
    if missing.is_empty() {
        println!("boot-lab: every node reported (logs and consoles: {})", work.display());
        0
    } else {
        println!(
            "boot-lab: no report from {} (logs and consoles: {})",
            missing.join(", "),
            work.display()
        );
        1
    }
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}
