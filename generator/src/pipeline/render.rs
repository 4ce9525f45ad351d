//! `hardshift render`: the release's own renders over the bundle, through podman, as bootkube.sh
//! runs them on the installer's bootstrap node. The layout and the steps are pure
//! (`crate::render`); this runs them: in a work directory beside the bundle, each step's reads
//! checked first, podman's output kept per step, then everything moved to DIR/render/ whole.

use super::error::Error;
use super::live::Live;
use super::outputs::{self, TreeError};
use crate::cluster::Cluster;
use crate::fsio;
use crate::pki;
use crate::render::{self, Net, Step};
use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long one render may run by default: the release's take seconds to a minute or two each
/// (an image pulled through a slow mirror the longest).
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// How long a step stopped at its deadline has between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// How to run the renders.
#[derive(Debug, Clone)]
pub struct Options {
    /// The podman to run (`$PODMAN`, else `podman`): a stand-in may take its place.
    pub podman: PathBuf,
    /// Images to use in place of the release's, by tag (a patched operator, a local build).
    pub images: BTreeMap<String, String>,
    /// Each step's deadline: then its whole process group is killed, and the run fails.
    pub step_timeout: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            podman: PathBuf::from("podman"),
            images: BTreeMap::new(),
            step_timeout: DEFAULT_STEP_TIMEOUT,
        }
    }
}

/// One render as it ran.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ran {
    pub name: String,
    pub image: String,
    /// The whole command line.
    pub argv: Vec<String>,
    pub seconds: f64,
    /// Its output, under DIR/render/.
    pub log: String,
}

/// What `render` leaves in DIR/render/renders.json.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Rendered {
    pub release: String,
    pub version: String,
    pub kubernetes: String,
    pub steps: Vec<Ran>,
    /// The SHA-256 of every file of the layout the renders were given: `create` takes what they
    /// made only while the bundle would give them the same.
    pub layout: BTreeMap<String, String>,
    /// The SHA-256 of every file in DIR/render but this record, by path under it: `verify` names
    /// any changed, added or removed since. None in a record from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<BTreeMap<String, String>>,
}

/// The record's name in DIR/render.
pub const RECORD: &str = "renders.json";

/// The SHA-256 of each file of a layout, by path.
pub fn layout_hashes(assets: &[render::Asset]) -> BTreeMap<String, String> {
    assets
        .iter()
        .map(|a| (a.path.clone(), crate::bundle::sha256_hex(&a.bytes)))
        .collect()
}

/// Run every render for DIR's bundle; `say` hears each step as it starts (its number from 1, of
/// how many, and what runs).
pub fn run(dir: &Path, cluster: &Cluster, opts: &Options, say: &mut dyn FnMut(usize, usize, String)) -> Result<Rendered, Error> {
    // podman takes a volume's host path only absolute: `--dir ocp4` is the same as its full path.
    let dir = &std::path::absolute(dir).map_err(Error::io(dir))?;
    let steps = render::steps(cluster).map_err(|e| Error::input(format!("{}: {e}", dir.display())))?;
    let _lock = fsio::lock(dir, "render")?;
    let live = Live::read(dir, &pki::plan(cluster));
    let assets = layout_of(dir, cluster, &live)?;
    let layout = layout_hashes(&assets);
    // A failed run's work was named to the user then; the next run clears it (under the lock,
    // nothing else is rendering here).
    let stale = format!(".{}.new-", render::DIR);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&stale) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let work = dir.join(format!("{stale}{}", std::process::id()));
    let files: Vec<(String, u32, Vec<u8>)> = assets
        .into_iter()
        .map(|a| (format!("assets/{}", a.path), a.mode, a.bytes))
        .chain([("pull-secret.json".to_string(), 0o600, cluster.pull_secret.clone().into_bytes())])
        .chain(crate::assets::node::registries_conf(cluster).map(|r| ("registries.conf".to_string(), 0o644, r.into_bytes())))
        .collect();
    fsio::replace_dir(&work, &files, &[]).map_err(Error::io(&work))?;
    let kept = |m: String| format!("{m}\n    the renders' work is kept in {} (the next run clears it)", work.display());
    let failed = |e: Error| match e {
        Error::Input(m) => Error::Input(kept(m)),
        other => Error::Other(kept(other.to_string())),
    };
    let mut ran = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let image = opts
            .images
            .get(step.tag)
            .cloned()
            .unwrap_or_else(|| cluster.release.tag(step.tag).to_string());
        say(i + 1, steps.len(), format!("render: {} ({image})", step.name));
        ran.push(one(&work, step, &image, opts).map_err(failed)?);
    }
    // What the renders left, as it will be in DIR/render (each step's output was checked).
    let outputs = outputs::hashes(&work).map_err(|e| failed(refused("the renders", e)))?;
    let rendered = Rendered {
        release: cluster.release.image.clone(),
        version: cluster.release.version.clone().unwrap_or_default(),
        kubernetes: cluster.release.kubernetes.clone().unwrap_or_default(),
        steps: ran,
        layout,
        outputs: Some(outputs.into_iter().filter(|(p, _)| p != RECORD).collect()),
    };
    let json = serde_json::to_vec_pretty(&rendered).map_err(Error::other)?;
    fsio::write_file_atomic(&work.join(RECORD), &json, 0o644).map_err(Error::other)?;
    let target = dir.join(render::DIR);
    let old = dir.join(format!(".{}.old-{}", render::DIR, std::process::id()));
    fsio::swap_into(&work, &target, &old).map_err(Error::io(&target))?;
    Ok(rendered)
}

/// The layout over the live bundle. The renders must be given the bundle's own CAs: refused when
/// it has not made them yet.
fn layout_of(dir: &Path, cluster: &Cluster, live: &Live) -> Result<Vec<render::Asset>, Error> {
    let then = format!("`hardshift create --dir {}` first", dir.display());
    let issued = super::side::own_pki(dir, cluster, live, time::OffsetDateTime::now_utc(), "the renders", &then)?;
    render::layout(cluster, &issued).map_err(Error::other)
}

/// Run one step in `work` (its assets in work/assets), then bootkube's copies.
fn one(work: &Path, step: &Step, image: &str, opts: &Options) -> Result<Ran, Error> {
    let assets = work.join("assets");
    check_reads(step, &assets)?;
    let network = match &step.net {
        Net::None => None,
        Net::Bootstrap { subnet, ip, .. } => Some(bootstrap_network(&opts.podman, subnet, *ip)?),
    };
    let argv = podman_argv(work, step, image, opts, network.as_deref());
    let (log, out) = open_log(work, step)?;
    let t = Instant::now();
    let status = execute(work, step, &argv, out, network.as_deref(), opts)?;
    let seconds = t.elapsed().as_secs_f64();
    judge(status, step, image, opts, &log)?;
    after(step, image, &assets)?;
    Ok(Ran {
        name: step.name.to_string(),
        image: image.to_string(),
        argv,
        seconds,
        log: format!("logs/{}.log", step.name),
    })
}

/// Every asset a step reads, there and not empty: a render given an empty file writes an empty
/// Secret or ConfigMap and says nothing.
fn check_reads(step: &Step, assets: &Path) -> Result<(), Error> {
    for r in &step.reads {
        let p = assets.join(r);
        if std::fs::metadata(&p).map(|m| m.len() == 0).unwrap_or(true) {
            return Err(Error::input(format!(
                "the {} render reads {r}, which is {} in its assets ({}): refusing to run it on a partial layout",
                step.name,
                if p.exists() { "empty" } else { "missing" },
                assets.display()
            )));
        }
    }
    Ok(())
}

/// The step's log, work/logs/NAME.log. A render's output may quote what it was given: this
/// user's only, like the keys beside it.
fn open_log(work: &Path, step: &Step) -> Result<(PathBuf, std::fs::File), Error> {
    let logs = work.join("logs");
    crate::fsio::make_dir_all(&logs, 0o700).map_err(Error::other)?;
    let log = logs.join(format!("{}.log", step.name));
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&log)
        .map_err(Error::io(&log))?;
    Ok((log, out))
}

/// podman run to its end or its deadline (None), its output into `out`; what it leaves behind
/// (a container past the deadline, the step's network) removed.
fn execute(
    work: &Path,
    step: &Step,
    argv: &[String],
    out: std::fs::File,
    network: Option<&str>,
    opts: &Options,
) -> Result<Option<std::process::ExitStatus>, Error> {
    let err = out.try_clone().map_err(Error::other)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdout(out).stderr(err);
    if work.join("registries.conf").is_file() {
        cmd.env("CONTAINERS_REGISTRIES_CONF", work.join("registries.conf"));
    }
    let status = run_group(&mut cmd, opts.step_timeout);
    if matches!(status, Ok(None)) {
        // podman's container runs under conmon, outside the group: stopped by name.
        let _ = Command::new(&opts.podman).args(["rm", "-f", &container_name(step)]).output();
    }
    if let Some(n) = network {
        let _ = Command::new(&opts.podman).args(["network", "rm", "-f", n]).output();
    }
    status.map_err(|e| {
        Error::input(format!(
            "{}: {e} (install podman, or set PODMAN to the podman to use)",
            opts.podman.display()
        ))
    })
}

/// A step stopped at its deadline or failed is an error quoting the end of its log.
fn judge(status: Option<std::process::ExitStatus>, step: &Step, image: &str, opts: &Options, log: &Path) -> Result<(), Error> {
    let Some(status) = status else {
        return Err(Error::other(format!(
            "the {} render ({image}) did not finish within {} (--step-timeout): stopped, its processes killed; the last of its output:\n  {}\n    its whole output: {}",
            step.name,
            show(opts.step_timeout),
            tail(log),
            log.display()
        )));
    };
    if !status.success() {
        return Err(Error::other(format!(
            "the {} render ({image}) failed ({status}); the last of its output:\n  {}\n    its whole output: {}",
            step.name,
            tail(log),
            log.display()
        )));
    }
    Ok(())
}

/// What a step made is data: a link, a FIFO, a device or a second name for a file anywhere in
/// the assets is refused before bootkube's copies (which would write through a link) or
/// anything else reads it. Then bootkube's copies.
fn after(step: &Step, image: &str, assets: &Path) -> Result<(), Error> {
    outputs::walk(assets, &mut |_, _| Ok(())).map_err(|e| refused(&format!("the {} render ({image})", step.name), e.under("assets")))?;
    for c in &step.then {
        copy_all(&assets.join(&c.from), &assets.join(&c.to)).map_err(|e| {
            Error::other(format!(
                "after the {} render: {e} (bootkube copies {}/* to {}/)",
                step.name, c.from, c.to
            ))
        })?;
    }
    Ok(())
}

/// podman's command line for a step.
pub fn podman_argv(work: &Path, step: &Step, image: &str, opts: &Options, network: Option<&str>) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        opts.podman.to_string_lossy().into(),
        "run".into(),
        "--rm".into(),
        "--quiet".into(),
        "--user=0".into(),
        format!("--name={}", container_name(step)),
        format!("--authfile={}", work.join("pull-secret.json").display()),
        format!("--volume={}:/assets:z", work.join("assets").display()),
        format!("--entrypoint={}", step.entrypoint),
    ];
    match (&step.net, network) {
        (Net::Bootstrap { hostname, ip, .. }, Some(n)) => {
            argv.extend([format!("--network={n}"), format!("--ip={ip}"), format!("--hostname={hostname}")]);
        }
        _ => argv.push("--net=none".into()),
    }
    argv.push(image.to_string());
    argv.extend(step.args.iter().cloned());
    argv
}

/// A podman network on the machine network, internal (nothing routed out), in which the etcd
/// render runs at the bootstrap's address. Its gateway is an address of the subnet the
/// bootstrap does not have.
fn bootstrap_network(podman: &Path, subnet: &str, ip: std::net::IpAddr) -> Result<String, Error> {
    let name = format!("hardshift-render-{}", std::process::id());
    let net: ipnet::IpNet = subnet
        .parse()
        .map_err(|e| Error::input(format!("machine network {subnet:?}: {e}")))?;
    let gateway = net.hosts().find(|h| *h != ip).ok_or_else(|| {
        Error::input(format!(
            "machine network {subnet}: no address beside the bootstrap's for podman's gateway"
        ))
    })?;
    // A run killed during its etcd step left its network, on the same subnet, which podman
    // would refuse to create again: remove those whose run is gone (and any of this PID's).
    remove_stale_networks(podman, &name);
    let out = Command::new(podman)
        .args(["network", "create", "--internal"])
        .arg(format!("--subnet={net}"))
        .arg(format!("--gateway={gateway}"))
        .arg(&name)
        .output()
        .map_err(|e| Error::input(format!("{}: {e} (install podman, or set PODMAN)", podman.display())))?;
    if !out.status.success() {
        return Err(Error::other(format!(
            "podman network create (for the etcd render, at the bootstrap's address {ip}): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(name)
}

/// Remove the `hardshift-render-PID` networks whose PID is not running, and `mine`.
fn remove_stale_networks(podman: &Path, mine: &str) {
    let Ok(out) = Command::new(podman).args(["network", "ls", "--format", "{{.Name}}"]).output() else {
        return;
    };
    for name in String::from_utf8_lossy(&out.stdout).lines() {
        let stale = name
            .strip_prefix("hardshift-render-")
            .is_some_and(|pid| pid.parse::<u32>().is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()));
        if stale || name == mine {
            let _ = Command::new(podman).args(["network", "rm", "-f", name]).output();
        }
    }
}

/// The container of a step, by name (this run's only).
fn container_name(step: &Step) -> String {
    format!("hardshift-render-{}-{}", std::process::id(), step.name)
}

/// The last lines of a render's output, however it is encoded (shown lossily, never hidden).
fn tail(log: &Path) -> String {
    let bytes = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n  ")
}

/// A render that left what is not data: an input error (a tampered or broken image), naming
/// the entry under the renders' output.
fn refused(who: &str, e: TreeError) -> Error {
    match e {
        TreeError::Refused { .. } => Error::input(format!("{who} left {e}; nothing of it was used")),
        TreeError::Io { .. } => Error::other(format!("{who}: {e}")),
    }
}

/// `90s`, `20m`, `1h`.
pub fn show(d: Duration) -> String {
    match d.as_secs() {
        0 => format!("{}ms", d.as_millis()),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Run `cmd` in a process group of its own until it exits (Some) or `deadline` passes (None:
/// the group then has SIGTERM, and `GRACE` later SIGKILL). Either way whatever is left in the
/// group is killed before this returns: nothing a step started writes into its work after it.
fn run_group(cmd: &mut Command, deadline: Duration) -> std::io::Result<Option<std::process::ExitStatus>> {
    use nix::sys::signal::{killpg, Signal};
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    let mut child = cmd.process_group(0).spawn()?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Exited, not yet reaped (WNOWAIT): its ID, the group's, cannot be reused meanwhile.
    let exited = || loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT) {
            Ok(WaitStatus::StillAlive) => return false,
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return true,
        }
    };
    let wait_until = |end: Instant| {
        let mut pause = Duration::from_millis(5);
        while !exited() {
            let now = Instant::now();
            if now >= end {
                return false;
            }
            std::thread::sleep(pause.min(end - now));
            pause = (pause * 2).min(Duration::from_millis(200));
        }
        true
    };
    let start = Instant::now();
    let done = wait_until(start + deadline);
    if !done {
        let _ = killpg(pid, Signal::SIGTERM);
        wait_until(Instant::now() + GRACE);
    }
    let _ = killpg(pid, Signal::SIGKILL);
    let status = child.wait()?;
    Ok(done.then_some(status))
}

/// `cp -r FROM/* TO/`, as bootkube does, following nothing: FROM is read as data
/// (`outputs::walk`), and every directory and file written under TO is made here, never opened
/// through a link.
fn copy_all(from: &Path, to: &Path) -> std::io::Result<()> {
    let err = |e: TreeError| std::io::Error::other(e.at(from));
    outputs::walk(from, &mut |rel, mut src| {
        let dest = to.join(rel);
        make_dirs(to, Path::new(rel).parent().unwrap_or(Path::new("")))?;
        let mode = src.metadata()?.permissions().mode() & 0o7777;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&dest)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dest.display())))?;
        std::io::copy(&mut src, &mut out)?;
        out.set_permissions(std::fs::Permissions::from_mode(mode))
    })
    .map_err(err)
}

/// `base/rel` and every directory between, each a directory (made if missing), never a link.
fn make_dirs(base: &Path, rel: &Path) -> std::io::Result<()> {
    let one = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(std::io::Error::other(format!(
            "{}: not a directory (a link?): refusing to write through it",
            p.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => crate::fsio::make_dir(p, 0o755),
        Err(e) => Err(e),
    };
    let mut p = base.to_path_buf();
    one(&p)?;
    for c in rel.components() {
        p.push(c);
        one(&p)?;
    }
    Ok(())
}
