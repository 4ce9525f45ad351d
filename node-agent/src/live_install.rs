//! The live system's install (`live_install` in the agent's config, the live config only): the
//! agent checks the installation disk, runs `coreos-installer install` with the node's config
//! pinned by its hash, follows its progress lines ("Read disk 1.2 GiB/3.0 GiB (40%)"), reports
//! each stage as the `live-install` component, and reboots into the installed system once the
//! disk is written. The command and its arguments come from the bundle's config, never from a
//! message. A failure stays reported (no retry: a missing disk or a changed config does not mend
//! itself); the admin fixes it and boots the node again.

use hardshift_agent_config::LiveInstall;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{self, install, Component, InstallStage};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// coreos-installer's lines kept for the report (its error is among the last).
const TAIL_LINES: usize = 12;
/// A line longer than this is cut (a progress line is ~40 bytes).
const LINE_MAX: usize = 400;
/// Written once the disk is: a restarted agent on the same live boot reboots, never writes again.
const DONE_MARK: &str = "live-install.done";

/// Where the install is, as the reports say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub stage: InstallStage,
    pub percent: Option<u8>,
    /// The disk as configured, then as it resolved.
    pub disk: String,
    pub disk_bytes: Option<u64>,
    /// When the stage or its percentage last moved (seconds since the epoch).
    pub moved_s: i64,
    pub error: String,
    pub tail: VecDeque<String>,
    /// coreos-installer's first `Error:` line and the causes under it (`Caused by:` and the
    /// indented lines), as it prints anyhow's report: the reason, which its last line ("Error:
    /// install failed") does not say.
    pub reported: Vec<String>,
}

impl Progress {
    pub fn new(disk: &str, now_s: i64) -> Progress {
        Progress {
            stage: InstallStage::Starting,
            percent: None,
            disk: disk.to_string(),
            disk_bytes: None,
            moved_s: now_s,
            error: String::new(),
            tail: VecDeque::new(),
            reported: Vec::new(),
        }
    }

    fn moved(&mut self, stage: InstallStage, percent: Option<u8>, now_s: i64) {
        if (stage, percent) != (self.stage, self.percent) {
            self.moved_s = now_s;
        }
        self.stage = stage;
        self.percent = percent;
    }

    /// One line coreos-installer printed: kept in the tail; a progress line moves the percentage.
    pub fn line(&mut self, raw: &str, now_s: i64) {
        let line = raw.trim();
        if line.is_empty() {
            return;
        }
        let caused = raw.starts_with(char::is_whitespace) || line == "Caused by:";
        if ((self.reported.is_empty() && line.starts_with("Error:")) || (!self.reported.is_empty() && caused && self.reported.len() < 8))
            && line != "Caused by:"
        {
            self.reported.push(line.chars().take(LINE_MAX).collect());
        }
        if let Some(p) = percent_of(line) {
            self.moved(InstallStage::Writing, Some(p), now_s);
            // Progress lines replace each other in the tail: the error stays in sight.
            if self.tail.back().is_some_and(|l| percent_of(l).is_some()) {
                self.tail.pop_back();
            }
        }
        let cut: String = line.chars().take(LINE_MAX).collect();
        self.tail.push_back(cut);
        while self.tail.len() > TAIL_LINES {
            self.tail.pop_front();
        }
    }

    /// Failed with `error` (coreos-installer's own `Error:` line when it printed one).
    pub fn failed(&mut self, error: String, now_s: i64) {
        self.error = match self.reported.is_empty() {
            true => error,
            false => self.reported.join(": "),
        };
        self.moved(InstallStage::Failed, self.percent, now_s);
    }

    /// The `live-install` component.
    pub fn component(&self, now_s: i64) -> ComponentState {
        let still = (now_s - self.moved_s).max(0);
        let disk = match self.disk_bytes {
            Some(b) => format!("{} ({})", self.disk, size(b)),
            None => self.disk.clone(),
        };
        let (health, reason) = match self.stage {
            InstallStage::Starting => (Health::Warning, format!("installing to {disk}")),
            InstallStage::Writing => (
                Health::Warning,
                format!("{} {}% to {disk}", self.stage.assisted(), self.percent.unwrap_or(0)),
            ),
            InstallStage::Rebooting => (Health::Ok, format!("{disk} written; rebooting into it")),
            InstallStage::Failed => (Health::Failing, format!("{disk}: {}", self.error)),
        };
        let mut d = HashMap::new();
        d.insert(install::STAGE.to_string(), self.stage.slug().to_string());
        d.insert(install::DISK.to_string(), self.disk.clone());
        d.insert(install::STILL_S.to_string(), still.to_string());
        if let Some(p) = self.percent {
            d.insert(install::PERCENT.to_string(), p.to_string());
        }
        if let Some(b) = self.disk_bytes {
            d.insert(install::DISK_BYTES.to_string(), b.to_string());
        }
        if !self.error.is_empty() {
            d.insert(install::ERROR.to_string(), self.error.clone());
        }
        if !self.tail.is_empty() {
            d.insert(install::TAIL.to_string(), self.tail.iter().cloned().collect::<Vec<_>>().join("\n"));
        }
        vocab::component(Component::LiveInstall, health, self.stage.assisted(), reason).with_details(d)
    }
}

/// "Read disk 1.2 GiB/3.0 GiB (40%)" → 40 (coreos-installer's ProgressReader, without a TTY).
pub fn percent_of(line: &str) -> Option<u8> {
    let rest = line.trim_start_matches("> ").strip_prefix("Read disk ")?;
    let inner = rest.rsplit_once('(')?.1.strip_suffix("%)")?;
    inner.parse::<u8>().ok().filter(|p| *p <= 100)
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b => format!("{} MiB", b >> 20),
    }
}

/// The install's shared state: written by the task, read by every report.
#[derive(Default)]
pub struct Install(Mutex<Option<Progress>>);

impl Install {
    fn update(&self, f: impl FnOnce(&mut Progress)) {
        if let Ok(mut g) = self.0.lock() {
            if let Some(p) = g.as_mut() {
                f(p);
            }
        }
    }

    pub fn component(&self, now_s: i64) -> Option<ComponentState> {
        self.0.lock().ok()?.as_ref().map(|p| p.component(now_s))
    }
}

/// A block device's size (sysfs counts 512-byte sectors whatever the disk's own).
fn disk_bytes(dev: &Path) -> Option<u64> {
    let name = dev.file_name()?.to_str()?;
    let sectors: u64 = std::fs::read_to_string(format!("/sys/class/block/{name}/size"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(sectors * 512)
}

/// The machine's disks, for the message when the configured one is not there.
fn disks() -> String {
    let mut out: Vec<String> = std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !["loop", "ram", "zram", "sr", "fd"].iter().any(|p| n.starts_with(p)))
        .map(|n| match disk_bytes(&PathBuf::from(&n)) {
            Some(b) => format!("{n} {}", size(b)),
            None => n,
        })
        .collect();
    out.sort();
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

/// The disk as a block device: its resolved path and size, or why not.
fn resolve(disk: &str) -> Result<(PathBuf, Option<u64>), String> {
    use std::os::unix::fs::FileTypeExt;
    let dev = std::fs::canonicalize(disk).map_err(|_| format!("installation disk {disk} not found; this machine's disks: {}", disks()))?;
    let meta = std::fs::metadata(&dev).map_err(|e| format!("{}: {e}", dev.display()))?;
    if !meta.file_type().is_block_device() {
        return Err(format!("installation disk {disk} is not a block device"));
    }
    let bytes = disk_bytes(&dev);
    Ok((dev, bytes))
}

/// coreos-installer's arguments for this install.
pub fn args(li: &LiveInstall, dev: &Path) -> Vec<String> {
    let mut a = vec![
        "install".to_string(),
        dev.display().to_string(),
        "--ignition-url".into(),
        li.config_url.clone(),
        "--ignition-hash".into(),
        li.config_hash.clone(),
    ];
    if let Some(u) = &li.image_url {
        a.extend(["--image-url".into(), u.clone()]);
        if li.image_unsigned {
            a.push("--insecure".into());
        }
    }
    a
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The most the reboot waits for the "rebooting" report to be acknowledged.
const SETTLE: Duration = Duration::from_secs(20);

/// Start the install; `report_now` is told at each stage so the report goes out at once.
/// `drained`: whether every queued report is acknowledged (the reboot waits for the "rebooting"
/// one, at most `SETTLE`).
pub fn spawn(
    li: LiveInstall,
    state_dir: PathBuf,
    install: Arc<Install>,
    report_now: Arc<tokio::sync::Notify>,
    drained: impl Fn() -> bool + Send + 'static,
) {
    if let Ok(mut g) = install.0.lock() {
        *g = Some(Progress::new(&li.disk, now_s()));
    }
    tokio::spawn(async move {
        let done = state_dir.join(DONE_MARK);
        let written = done.exists() || run(&li, &install, &report_now).await;
        report_now.notify_one();
        if !written {
            return;
        }
        let _ = std::fs::create_dir_all(&state_dir);
        let _ = std::fs::write(&done, b"");
        install.update(|p| p.moved(InstallStage::Rebooting, Some(100), now_s()));
        report_now.notify_one();
        if !li.reboot {
            return;
        }
        // The report saying so is queued at the notify; then it must leave.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let deadline = tokio::time::Instant::now() + SETTLE;
        while !drained() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tracing::info!("the installation disk is written: rebooting into the installed system");
        match tokio::process::Command::new("systemctl").arg("reboot").status().await {
            Ok(s) if s.success() => {}
            other => tracing::error!("systemctl reboot: {other:?}"),
        }
    });
}

/// The disk checked, coreos-installer run and followed; whether the disk was written.
async fn run(li: &LiveInstall, install: &Install, report_now: &tokio::sync::Notify) -> bool {
    let dev = match resolve(&li.disk) {
        Ok((dev, bytes)) => {
            install.update(|p| {
                p.disk_bytes = bytes;
                if dev.as_os_str() != li.disk.as_str() {
                    p.disk = format!("{} → {}", li.disk, dev.display());
                }
            });
            dev
        }
        Err(e) => {
            tracing::error!("{e}");
            install.update(|p| p.failed(e, now_s()));
            return false;
        }
    };
    report_now.notify_one();
    let mut child = match tokio::process::Command::new(&li.installer)
        .args(args(li, &dev))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            let e = format!(
                "{}: {e} (the live system must be RHCOS's live ISO or PXE image, which has coreos-installer)",
                li.installer.display()
            );
            install.update(|p| p.failed(e, now_s()));
            return false;
        }
    };
    let out = child.stdout.take().map(|o| follow(o, install, report_now));
    let err = child.stderr.take().map(|e| follow(e, install, report_now));
    let (_, _, status) = tokio::join!(
        futures_util::future::OptionFuture::from(out),
        futures_util::future::OptionFuture::from(err),
        child.wait()
    );
    match status {
        Ok(s) if s.success() => true,
        Ok(s) => {
            install.update(|p| p.failed(format!("coreos-installer exited with {s}"), now_s()));
            false
        }
        Err(e) => {
            install.update(|p| p.failed(format!("coreos-installer: {e}"), now_s()));
            false
        }
    }
}

/// Each line of one of coreos-installer's outputs (lines end in \n, or \r on a TTY), into the
/// progress; a new stage reports at once.
async fn follow(mut r: impl tokio::io::AsyncRead + Unpin, install: &Install, report_now: &tokio::sync::Notify) {
    let mut buf = vec![0u8; 8192];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(at) = pending.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).to_string();
            let mut moved_stage = false;
            install.update(|p| {
                let before = p.stage;
                p.line(&text, now_s());
                moved_stage = p.stage != before;
            });
            if moved_stage {
                report_now.notify_one();
            }
        }
        // A line with no end in sight is cut, not kept growing.
        if pending.len() > LINE_MAX * 4 {
            pending.clear();
        }
    }
    if !pending.is_empty() {
        let text = String::from_utf8_lossy(&pending).to_string();
        install.update(|p| p.line(&text, now_s()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coreos_installers_progress_lines_give_the_percentage() {
        assert_eq!(percent_of("Read disk 1.2 GiB/3.0 GiB (40%)"), Some(40));
        assert_eq!(percent_of("> Read disk 3.0 GiB/3.0 GiB (100%)"), Some(100));
        assert_eq!(percent_of("Read disk 10.5 MiB"), None, "no length, no percentage");
        assert_eq!(percent_of("Read disk 1/2 (140%)"), None);
        assert_eq!(percent_of("Writing Ignition config"), None);
    }

    #[test]
    fn the_tail_keeps_the_error_and_one_progress_line() {
        let mut p = Progress::new("/dev/vda", 0);
        p.line("Downloading image from http://h/metal.raw", 1);
        for i in 0..50 {
            p.line(&format!("Read disk {i}.0 MiB/50.0 MiB ({}%)", i * 2), 2 + i);
        }
        assert_eq!(p.stage, InstallStage::Writing);
        assert_eq!(p.percent, Some(98));
        assert_eq!(p.tail.len(), 2, "{:?}", p.tail);
        // anyhow's report, then coreos-installer's own last word.
        for l in [
            "",
            "Error: writing Ignition configuration",
            "",
            "Caused by:",
            "    0: failed to validate Ignition configuration digest",
            "    1: uncompressed digest mismatch: expected sha256 ab, found cd",
            "",
            "Resetting partition table",
            "Error: install failed",
        ] {
            p.line(l, 60);
        }
        p.failed("coreos-installer exited with exit status: 1".into(), 62);
        assert_eq!(
            p.error,
            "Error: writing Ignition configuration: 0: failed to validate Ignition configuration digest: 1: uncompressed digest mismatch: expected sha256 ab, found cd"
        );
        let c = p.component(100);
        assert_eq!(c.health, Health::Failing as i32);
        assert_eq!(c.details[install::STAGE], "failed");
        assert_eq!(c.details[install::STILL_S], "38");
        assert!(c.details[install::TAIL].contains("Error: install failed"), "{c:?}");
        let mut plain = Progress::new("/dev/vda", 0);
        plain.failed("coreos-installer: No such file or directory".into(), 1);
        assert_eq!(plain.error, "coreos-installer: No such file or directory");
    }

    #[test]
    fn the_percentage_moving_is_what_counts_as_progress() {
        let mut p = Progress::new("/dev/vda", 0);
        p.line("Read disk 1 MiB/10 MiB (10%)", 5);
        p.line("Read disk 1 MiB/10 MiB (10%)", 50);
        assert_eq!(p.component(70).details[install::STILL_S], "65");
        p.line("Read disk 2 MiB/10 MiB (20%)", 80);
        assert_eq!(p.component(90).details[install::STILL_S], "10");
        assert_eq!(p.component(90).reason, "Writing image to disk 20% to /dev/vda");
    }

    #[test]
    fn a_missing_disk_names_the_disks_there_are() {
        let e = resolve("/dev/disk/by-id/hardshift-no-such-disk").unwrap_err();
        assert!(
            e.starts_with("installation disk /dev/disk/by-id/hardshift-no-such-disk not found; this machine's disks: "),
            "{e}"
        );
        assert!(resolve("/etc/hostname").unwrap_err().contains("not a block device") || !Path::new("/etc/hostname").exists());
    }

    #[test]
    fn the_arguments_pin_the_config_by_its_hash() {
        let li = LiveInstall {
            disk: "/dev/vda".into(),
            config_url: "http://h/ignition/m.ign".into(),
            config_hash: "sha256-ab".into(),
            image_url: Some("http://h/rhcos/metal.raw".into()),
            image_unsigned: true,
            installer: "coreos-installer".into(),
            reboot: true,
        };
        assert_eq!(
            args(&li, Path::new("/dev/vda")).join(" "),
            "install /dev/vda --ignition-url http://h/ignition/m.ign --ignition-hash sha256-ab --image-url http://h/rhcos/metal.raw --insecure"
        );
    }
}
