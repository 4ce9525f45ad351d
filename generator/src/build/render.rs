//! `hardshift render`: the release's own renders over the bundle, through podman, as bootkube.sh
//! runs them on the installer's bootstrap node. The layout and the steps are pure
//! (`crate::render`); this runs them: in a work directory beside the bundle, each step's reads
//! checked first, podman's output kept per step, then everything moved to DIR/render/ whole.

use super::{Error, Live};
use crate::cluster::Cluster;
use crate::fsio;
use crate::pki;
use crate::render::{self, Net, Step};
use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How to run the renders.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The podman to run (`$PODMAN`, else `podman`): a stand-in may take its place.
    pub podman: PathBuf,
    /// Images to use in place of the release's, by tag (a patched operator, a local build).
    pub images: BTreeMap<String, String>,
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
}

/// The SHA-256 of each file of a layout, by path.
pub fn layout_hashes(assets: &[render::Asset]) -> BTreeMap<String, String> {
    assets
        .iter()
        .map(|a| (a.path.clone(), crate::bundle::sha256_hex(&a.bytes)))
        .collect()
}

/// Run every render for DIR's bundle; `say` hears each step as it starts.
pub fn run(dir: &Path, cluster: &Cluster, opts: &Options, say: &mut dyn FnMut(String)) -> Result<Rendered, Error> {
    let steps = render::steps(cluster).map_err(|e| Error::input(format!("{}: {e}", dir.display())))?;
    let _lock = fsio::lock(dir, "render").map_err(Error::other)?;
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
    fsio::replace_dir(&work, &files, &[]).map_err(|e| Error::other(format!("{}: {e}", work.display())))?;
    let kept = |m: String| format!("{m}\n    the renders' work is kept in {} (the next run clears it)", work.display());
    let failed = |e: Error| match e {
        Error::Other(m) => Error::Other(kept(m)),
        Error::Input(m) => Error::Input(kept(m)),
    };
    let mut ran = Vec::new();
    for step in &steps {
        let image = opts
            .images
            .get(step.tag)
            .cloned()
            .unwrap_or_else(|| cluster.release.tag(step.tag).to_string());
        say(format!("render: {} ({image})", step.name));
        ran.push(one(&work, step, &image, opts).map_err(failed)?);
    }
    let rendered = Rendered {
        release: cluster.release.image.clone(),
        version: cluster.release.version.clone().unwrap_or_default(),
        kubernetes: cluster.release.kubernetes.clone().unwrap_or_default(),
        steps: ran,
        layout,
    };
    let json = serde_json::to_vec_pretty(&rendered).map_err(Error::other)?;
    fsio::write_file_atomic(&work.join("renders.json"), &json, 0o644).map_err(Error::other)?;
    let target = dir.join(render::DIR);
    let old = dir.join(format!(".{}.old-{}", render::DIR, std::process::id()));
    fsio::swap_into(&work, &target, &old).map_err(|e| Error::other(format!("{}: {e}", target.display())))?;
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
    // Every asset it reads, there and not empty: a render given an empty file writes an empty
    // Secret or ConfigMap and says nothing.
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
    let network = match &step.net {
        Net::None => None,
        Net::Bootstrap { subnet, ip, .. } => Some(bootstrap_network(&opts.podman, subnet, *ip)?),
    };
    let argv = podman_argv(work, step, image, opts, network.as_deref());
    let logs = work.join("logs");
    crate::fsio::make_dir_all(&logs, 0o700).map_err(Error::other)?;
    let log = logs.join(format!("{}.log", step.name));
    // A render's output may quote what it was given: this user's only, like the keys beside it.
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&log)
        .map_err(|e| Error::other(format!("{}: {e}", log.display())))?;
    let err = out.try_clone().map_err(Error::other)?;
    let t = std::time::Instant::now();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdout(out).stderr(err);
    if work.join("registries.conf").is_file() {
        cmd.env("CONTAINERS_REGISTRIES_CONF", work.join("registries.conf"));
    }
    let status = cmd.status();
    if let Some(n) = &network {
        let _ = Command::new(&opts.podman).args(["network", "rm", "-f", n]).output();
    }
    let status = status.map_err(|e| {
        Error::input(format!(
            "{}: {e} (install podman, or set PODMAN to the podman to use)",
            opts.podman.display()
        ))
    })?;
    let seconds = t.elapsed().as_secs_f64();
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(Error::other(format!(
            "the {} render ({image}) failed ({status}); the last of its output:\n  {}\n    its whole output: {}",
            step.name,
            tail.join("\n  "),
            log.display()
        )));
    }
    for c in &step.then {
        copy_all(&assets.join(&c.from), &assets.join(&c.to)).map_err(|e| {
            Error::other(format!(
                "after the {} render: {e} (bootkube copies {}/* to {}/)",
                step.name, c.from, c.to
            ))
        })?;
    }
    Ok(Ran {
        name: step.name.to_string(),
        image: image.to_string(),
        argv,
        seconds,
        log: format!("logs/{}.log", step.name),
    })
}

/// podman's command line for a step.
pub fn podman_argv(work: &Path, step: &Step, image: &str, opts: &Options, network: Option<&str>) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        opts.podman.to_string_lossy().into(),
        "run".into(),
        "--rm".into(),
        "--quiet".into(),
        "--user=0".into(),
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

/// `cp FROM/* TO/`: every file under `from` (recursively), into `to`.
fn copy_all(from: &Path, to: &Path) -> std::io::Result<()> {
    let rd = std::fs::read_dir(from).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", from.display())))?;
    crate::fsio::make_dir_all(to, 0o755)?;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_all(&p, &to.join(e.file_name()))?;
        } else {
            std::fs::copy(&p, to.join(e.file_name()))?;
        }
    }
    Ok(())
}
