//! `hardshift lab`: rewrite only the lab's files (DNS, DHCP, PXE, HAProxy) for the current bundle;
//! `hardshift lab serve`: run the helper from them.

use crate::failure::Failure;
use hardshift_generator::{fsio::Written, layout, pipeline};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    cluster: super::ClusterArgs,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Run the helper node from the bundle, in one process (root): dnsmasq (DHCP by MAC
    /// reservation, DNS, TFTP) and HAProxy supervised, the boot files served over HTTP (each
    /// node's config only to its own address), the collector beside them, and every DHCP, TFTP
    /// and HTTP step of a boot an event of its node (`hardshift events`, `status`, `diagnose`).
    Serve(ServeArgs),
    /// Switch the running helper's HAProxy to the post-pivot config (the bootstrap out of the
    /// API and machine-config backends), once `wait-for pivot-ready` holds.
    Pivot(PivotArgs),
}

#[derive(clap::Args)]
struct PivotArgs {
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The report database. Default: DIR/collector/reports.db
    #[arg(long)]
    db: Option<PathBuf>,
    /// Pivot although pivot-ready does not hold (the bootstrap's etcd member may still be needed).
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
struct ServeArgs {
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// RHCOS's live kernel, initramfs and rootfs (rhcos-live-kernel-x86_64,
    /// rhcos-live-initramfs.x86_64.img, rhcos-live-rootfs.x86_64.img), served under rhcos/.
    #[arg(long)]
    rhcos: Option<PathBuf>,
    /// Where undionly.kpxe and ipxe.efi are (Debian's `ipxe` package).
    #[arg(long, default_value = hardshift_helper::plan::DEBIAN_IPXE)]
    ipxe: PathBuf,
    /// The interface dnsmasq serves. Default: the one holding the helper's address.
    #[arg(long)]
    interface: Option<String>,
    /// Serve each node's config to any address, not only to the one its DHCP reservation gives
    /// it (a lab without reservations). The configs hold the cluster's keys.
    #[arg(long)]
    serve_to_any: bool,
    /// HAProxy with the post-pivot config (the bootstrap out of the API backends).
    #[arg(long)]
    post_pivot: bool,
    /// Do not run the collector here (it runs elsewhere).
    #[arg(long)]
    no_collector: bool,
    /// Where the collector listens. Default: 0.0.0.0 on the bundle's collector port.
    #[arg(long)]
    collector_listen: Option<SocketAddr>,
    /// The collector's dashboard (loopback: plain HTTP).
    #[arg(long, default_value = "127.0.0.1:9444")]
    web: SocketAddr,
    /// The report database (boot events go there too). Default: DIR/collector/reports.db
    #[arg(long)]
    db: Option<PathBuf>,
    /// Print what would run, from where, and what is missing; start nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Regenerate DIR/lab/ only, from the inputs and the live bundle's Ignition configs.
pub fn run(a: Args) -> Result<u8, Failure> {
    match a.action {
        Some(Action::Serve(s)) => return serve(s),
        Some(Action::Pivot(p)) => return pivot(p),
        None => {}
    }
    let cluster = a.cluster.load()?;
    let lab = a.cluster.dir.join(layout::LAB);
    match pipeline::side::lab(&a.cluster.dir, &cluster)? {
        (Written::Unchanged(_), n) => println!("lab unchanged: {n} files in {}", lab.display()),
        (Written::New(_), n) => println!("wrote {n} lab files to {}", lab.display()),
        (Written::Repaired { damage, moved_to, .. }, n) => println!(
            "wrote {n} lab files to {} (repaired {} problems in the live copy; the damaged one is in {})",
            lab.display(),
            damage.len(),
            moved_to.display()
        ),
    }
    Ok(0)
}

fn serve(s: ServeArgs) -> Result<u8, Failure> {
    use hardshift_helper::serve::{run, Error, Run};
    let inv = hardshift_bundle::Inventory::load(&s.dir)?;
    let listen = s
        .collector_listen
        .unwrap_or_else(|| SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), inv.collector_port));
    let db = super::db_path(&s.dir, s.db);
    let collector = (!s.no_collector).then(|| hardshift_collector::bundle::Serve {
        db: db.clone(),
        admin: super::logs::admin_socket(&s.dir),
        dir: s.dir.clone(),
        listen,
        limits: Default::default(),
        retain: Some(std::time::Duration::from_secs(7 * 86_400)),
        web: Some(s.web),
        kubeconfig: None,
        no_api_watch: false,
    });
    let r = Run {
        options: hardshift_helper::plan::Options {
            dir: s.dir,
            rhcos: s.rhcos,
            ipxe: s.ipxe,
            interface: s.interface,
            serve_to_any: s.serve_to_any,
            collector: collector.as_ref().map(|c| c.listen),
            post_pivot: s.post_pivot,
        },
        db,
        collector,
        dry_run: s.dry_run,
    };
    match run(r) {
        Ok(()) => Ok(0),
        Err(Error::Input(m)) => Err(Failure::input(m)),
        Err(e) => Err(Failure::other(e)),
    }
}

/// Leave the mark, then tell the running helper (SIGHUP to the pid its lock names).
fn pivot(p: PivotArgs) -> Result<u8, Failure> {
    use hardshift_collector::{phase, wait};
    let inv = hardshift_bundle::Inventory::load(&p.dir)?;
    if !p.force {
        let db = super::db_path(&p.dir, p.db.clone());
        let members = phase::Member::all(&inv);
        let last = phase::target("pivot-ready").expect("a target");
        let look = wait::until(
            &db,
            &members,
            ("pivot-ready", last),
            std::time::Duration::ZERO,
            std::time::Duration::from_millis(50),
            &mut |_| {},
        )
        .map_err(|e| super::broken_store(&db, e))?;
        if !look.reached {
            return Err(Failure::input(format!(
                "not pivot-ready, so the bootstrap stays in HAProxy:\n{}\n(`hardshift wait-for pivot-ready` waits for it; `--force` pivots anyway)",
                look.lines.join("\n")
            )));
        }
    }
    let state = p.dir.join(".hardshift/helper");
    hardshift_bundle::fsio::make_dir_all(&state, 0o700).map_err(|e| Failure::other(format!("{}: {e}", state.display())))?;
    let mark = state.join(hardshift_helper::plan::PIVOTED);
    hardshift_bundle::fsio::write_file_atomic(&mark, b"post-pivot\n", 0o644)
        .map_err(|e| Failure::other(format!("{}: {e}", mark.display())))?;
    // The running helper holds its lock, which names it ("pid N (lab serve)"). The text alone is
    // not trusted: the lock must be held, and the pid must be a `lab serve`, before it gets SIGHUP.
    let lock = state.join("lock");
    let held = matches!(
        hardshift_bundle::fsio::lock_file(&lock, "lab pivot"),
        Err(hardshift_bundle::fsio::LockError::Busy(_))
    );
    let is_lab_serve = |pid: &i32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            c.split(|b| *b == 0)
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w == [b"lab".as_slice(), b"serve".as_slice()])
        })
    };
    let holder = std::fs::read_to_string(&lock)
        .ok()
        .and_then(|t| t.strip_prefix("pid ")?.split_whitespace().next()?.parse::<i32>().ok())
        .filter(|pid| held && is_lab_serve(pid));
    match holder {
        Some(pid) => {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGHUP).map_err(Failure::other)?;
            println!("lab serve (pid {pid}): HAProxy starts again on lab/haproxy/haproxy-post-pivot.cfg (`hardshift events` shows it)");
        }
        None => println!("lab serve is not running: it starts with the post-pivot HAProxy config from now on"),
    }
    Ok(0)
}
