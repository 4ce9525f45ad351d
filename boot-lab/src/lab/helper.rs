//! What the helper serves, made from the bundle's lab files: its addresses on the bridge, the
//! HTTP root (Ignition configs, the iPXE script for the test image, the image), dnsmasq's config.

use crate::lab::parts::{Machine, Options};
use anyhow::Context;
use hardshift_bundle::Inventory;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The helper's addresses on the bridge (its own, the API and ingress VIPs, the collector's and
/// the HTTP server's, each once, with the machine network's prefix), and the HTTP server's
/// address and port.
pub(super) fn helper_addresses(c: &Inventory) -> anyhow::Result<(Vec<String>, (IpAddr, u16))> {
    let prefix = c
        .machine_networks
        .iter()
        .find(|n| n.contains(&c.helper_ip))
        .map(|n| n.prefix_len())
        .with_context(|| format!("the helper {} is in no machine network", c.helper_ip))?;
    let (http_ip, http_port) = http_endpoint(&c.http_base_url)?;
    let collector_ip: IpAddr = c.collector_address.parse().map_err(|_| {
        anyhow::anyhow!(
            "collector.address {:?} is a name: the boot lab puts the collector on the helper's bridge and needs an IP",
            c.collector_address
        )
    })?;
    let mut addrs: Vec<String> = Vec::new();
    for ip in [c.helper_ip, c.api_vip, c.ingress_vip, collector_ip, http_ip] {
        // A single node with no VIPs answers api and *.apps itself: its address is not the helper's.
        if c.nodes.iter().any(|n| n.ip == ip) {
            continue;
        }
        let a = format!("{ip}/{prefix}");
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    }
    Ok((addrs, (http_ip, http_port)))
}

/// WORK/served/: the bundle as this lab's helper serves it (`hardshift lab serve --dir`): its
/// inventory, HAProxy's configs and the PXELINUX configs the bundle's own; each node's config, the
/// iPXE script and the DHCP and DNS configs as this lab makes them (its faults, the test image's
/// boot); the bundle's `http/` files, each linked. And WORK/rhcos/: the test image's kernel and
/// initramfs under RHCOS's names, and an empty rootfs (the image boots its disk, not a live
/// rootfs). Returns (served, rhcos).
pub(super) fn served_bundle(o: &Options, c: &Inventory, machines: &[Machine]) -> anyhow::Result<(PathBuf, PathBuf)> {
    let served = o.work.join("served");
    let rhcos = o.work.join("rhcos");
    for d in ["ignition", "http", "lab/dnsmasq", "lab/pxe"] {
        let p = served.join(d);
        hardshift_bundle::fsio::make_dir_all(&p, 0o755).with_context(|| p.display().to_string())?;
    }
    hardshift_bundle::fsio::make_dir_all(&rhcos, 0o755).with_context(|| rhcos.display().to_string())?;
    link(
        &o.dir.join(hardshift_bundle::layout::INVENTORY),
        &served.join(hardshift_bundle::layout::INVENTORY),
    )?;
    // The bundle's live generation, which readers of the inventory go through; the served
    // directory's own state (`lab serve`'s) stays beside it, out of the bundle.
    let generation = hardshift_bundle::fsio::current(&o.dir)
        .with_context(|| format!("{}: no live generation (run `hardshift create`)", o.dir.display()))?;
    let state = served.join(".hardshift");
    hardshift_bundle::fsio::make_dir_all(&state, 0o700).with_context(|| state.display().to_string())?;
    link(&generation, &state.join("current"))?;
    link(&o.dir.join("lab/haproxy"), &served.join("lab/haproxy"))?;
    link(&o.dir.join("lab/pxe/pxelinux.cfg"), &served.join("lab/pxe/pxelinux.cfg"))?;
    // The live configs as written (`lab.liveAgent`): each holds its node's installed config's hash.
    let live = o.dir.join(hardshift_bundle::layout::LIVE);
    if live.is_dir() {
        link(&live, &served.join(hardshift_bundle::layout::LIVE))?;
    }
    for m in machines {
        let src = o.dir.join(format!("ignition/{}.ign", m.name));
        let written = std::fs::read(&src).with_context(|| src.display().to_string())?;
        let config = crate::fault::apply_ignition(&m.name, &written, &o.faults)?;
        write(&served.join(format!("ignition/{}.ign", m.name)), &config)?;
    }
    let ipxe = read_text(&o.dir.join("lab/pxe/boot.ipxe"))?;
    let ip_of = |n: &str| machines.iter().find(|m| m.name == n).map(|m| m.ip.clone());
    let ipxe = crate::fault::apply_ipxe(&ipxe_for_image(&ipxe, &c.http_base_url)?, &o.faults, &ip_of)?;
    write(&served.join("lab/pxe/boot.ipxe"), ipxe.as_bytes())?;
    let (dhcp, dns) = dnsmasq_confs(o, &c.name)?;
    write(&served.join(format!("lab/dnsmasq/{}-dhcp.conf", c.name)), dhcp.as_bytes())?;
    write(&served.join(format!("lab/dnsmasq/{}-dns.conf", c.name)), dns.as_bytes())?;
    if let Ok(entries) = std::fs::read_dir(o.dir.join("http")) {
        for e in entries.flatten() {
            link(&e.path(), &served.join("http").join(e.file_name()))?;
        }
    }
    link(&o.image.join("vmlinuz"), &rhcos.join(RHCOS_KERNEL))?;
    link(&o.image.join("initramfs.img"), &rhcos.join(RHCOS_INITRAMFS))?;
    // What the live agent writes (`lab.installImageURL` names it under rhcos/).
    link(&o.image.join(METAL_IMAGE), &rhcos.join(METAL_IMAGE))?;
    write(&rhcos.join("rhcos-live-rootfs.x86_64.img"), b"")?;
    Ok((served, rhcos))
}

/// RHCOS's live kernel and initramfs as the bundle's boot scripts name them under `rhcos/`.
const RHCOS_KERNEL: &str = "rhcos-live-kernel-x86_64";
const RHCOS_INITRAMFS: &str = "rhcos-live-initramfs.x86_64.img";
/// The test image's metal image (hack/boot-image.sh), served as `rhcos/metal.raw.zst`.
pub const METAL_IMAGE: &str = "metal.raw.zst";

/// The generated DHCP and DNS configs with the lab's faults applied, less any name the caller
/// drops from DNS (`lab serve` sets their TFTP root).
fn dnsmasq_confs(o: &Options, cluster: &str) -> anyhow::Result<(String, String)> {
    let dns_dir = o.dir.join("lab/dnsmasq");
    let dhcp = read_text(&dns_dir.join(format!("{cluster}-dhcp.conf")))?;
    let dhcp = crate::fault::apply_dhcp(&dhcp, &o.faults)?;
    let dns = read_text(&dns_dir.join(format!("{cluster}-dns.conf")))?;
    let dropped = |l: &str| {
        o.drop_dns
            .iter()
            .any(|n| l.contains(&format!("/{n}/")) || l.contains(&format!("={n},")))
    };
    let dns: String = dns.lines().filter(|l| !dropped(l)).map(|l| format!("{l}\n")).collect();
    let dns = crate::fault::apply_dns(&dns, &o.faults)?;
    Ok((dhcp, dns))
}

fn read_text(p: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(p).with_context(|| p.display().to_string())
}

/// `http://IP:PORT[/…]` → (IP, PORT): the helper address the HTTP server binds.
fn http_endpoint(url: &str) -> anyhow::Result<(IpAddr, u16)> {
    let bad = || anyhow::anyhow!("lab.httpBaseURL {url:?}: the boot lab serves it on the helper's bridge and needs http://IP[:PORT]");
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let host = rest.split('/').next().unwrap_or_default();
    let (ip, port) = match host.rsplit_once(':') {
        Some((ip, port)) => (ip, port.parse().map_err(|_| bad())?),
        None => (host, 80),
    };
    Ok((ip.parse().map_err(|_| bad())?, port))
}

/// The generated iPXE script with the test image in place of RHCOS's live images: the kernel and
/// initramfs come from the image (served under RHCOS's names, `served_bundle`); `coreos.live.rootfs_url` and `coreos.inst.install_dev` go (no
/// installer: the disk is ready, so the live rootfs is not fetched and Ignition runs on the disk's
/// first boot, not the installed system's); the node's `coreos.inst.ignition_url` becomes
/// `ignition.config.url`; the rest (the static `ip=`, `nameserver=`, consoles) is the bundle's.
/// Added: the root disk, Ignition's first-boot flags, journal errors on the serial console.
/// Not on this machine, unlike RHCOS: rpm-ostree, SELinux, the kubelet and CRI-O; Debian's
/// Ignition is 2.14 (config spec up to 3.3.0).
pub fn ipxe_for_image(generated: &str, base: &str) -> anyhow::Result<String> {
    let mut kernels = 0;
    let out: Vec<String> = generated
        .lines()
        .map(|l| {
            if let Some(args) = l.strip_prefix("kernel ") {
                kernels += 1;
                let mut a = vec![format!("kernel {base}/rhcos/{RHCOS_KERNEL}")];
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
                format!("initrd --name main {base}/rhcos/{RHCOS_INITRAMFS}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if kernels == 0 {
        return Err(anyhow::anyhow!("no kernel line in the bundle's boot.ipxe:\n{generated}"));
    }
    if out.iter().any(|l| l.contains("coreos.live.") || l.contains("coreos.inst.")) {
        return Err(anyhow::anyhow!(
            "RHCOS's live arguments left in the iPXE script:\n{}",
            out.join("\n")
        ));
    }
    Ok(out.join("\n") + "\n")
}

pub(super) fn write(p: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(p, bytes).with_context(|| p.display().to_string())
}

fn link(from: &Path, to: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(to);
    std::os::unix::fs::symlink(from, to).with_context(|| format!("{} → {}", to.display(), from.display()))
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
                "kernel http://h:8080/rhcos/rhcos-live-kernel-x86_64 initrd=main ignition.config.url=http://h:8080/ignition/m.ign ip=192.168.126.101::"
            ),
            "{out}"
        );
        assert!(
            out.contains("initrd --name main http://h:8080/rhcos/rhcos-live-initramfs.x86_64.img"),
            "{out}"
        );
        assert!(!out.contains("rootfs") && !out.contains("install_dev"), "{out}");
        assert!(ipxe_for_image("#!ipxe\nboot\n", "x").is_err());
    }
}
