//! What `lab serve` will run, from the bundle alone: dnsmasq on the bundle's own DHCP and DNS
//! configs (its TFTP root made here: the iPXE binaries, the PXELINUX configs, RHCOS's live
//! files), HAProxy on the bundle's pre-pivot config, the HTTP server on `lab.httpBaseUrl`, and
//! the ports each needs. Pure but for reading the bundle's files: `--dry-run` prints it.

use crate::ports::{Need, Proto};
use hardshift_bundle::{layout, Inventory};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// RHCOS's live files, as the bundle's iPXE script and PXELINUX configs name them under `rhcos/`.
pub const RHCOS_FILES: [&str; 3] = [
    "rhcos-live-kernel-x86_64",
    "rhcos-live-initramfs.x86_64.img",
    "rhcos-live-rootfs.x86_64.img",
];
/// The iPXE binaries the DHCP config names: BIOS (undionly.kpxe) and UEFI (ipxe.efi).
pub const IPXE_FILES: [&str; 2] = ["undionly.kpxe", "ipxe.efi"];
/// Where Debian's `ipxe` package puts them.
pub const DEBIAN_IPXE: &str = "/usr/lib/ipxe";
/// HAProxy's frontends (the bundle's haproxy.cfg binds each on every address): the API, the
/// machine-config server, ingress, and its stats page.
pub const HAPROXY_PORTS: [(u16, &str); 5] = [
    (6443, "API (HAProxy)"),
    (22623, "machine-config server (HAProxy)"),
    (80, "ingress HTTP (HAProxy)"),
    (443, "ingress HTTPS (HAProxy)"),
    (9000, "HAProxy stats"),
];

/// The mark `lab pivot` leaves in the state directory.
pub const PIVOTED: &str = "pivoted";

/// HAProxy on the bundle's post-pivot config.
pub fn haproxy_post_pivot(dir: &Path) -> Vec<String> {
    let cfg = dir.join(layout::LAB).join("haproxy/haproxy-post-pivot.cfg");
    let log = dir.join(".hardshift/helper").join(HAPROXY_LOG_CFG);
    let s = |p: &Path| p.display().to_string();
    vec!["haproxy".into(), "-db".into(), "-f".into(), s(&log), "-f".into(), s(&cfg)]
}

/// A second HAProxy config, beside the bundle's: its connection log (the bundle's `option
/// tcplog`) on stderr too, where the helper reads the machine-config server's requests.
pub const HAPROXY_LOG_CFG: &str = "haproxy-log.cfg";
pub const HAPROXY_LOG: &str = "global\n    log stderr format raw local0 info\n";

/// How the admin asked for it.
#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    /// RHCOS's live kernel, initramfs and rootfs.
    pub rhcos: Option<PathBuf>,
    /// Where undionly.kpxe and ipxe.efi are.
    pub ipxe: PathBuf,
    /// The interface dnsmasq serves (default: the one holding the helper's address).
    pub interface: Option<String>,
    pub serve_to_any: bool,
    /// Where the collector in the same process listens, if it runs there.
    pub collector: Option<SocketAddr>,
    /// HAProxy's post-pivot config (the bootstrap out of the backends).
    pub post_pivot: bool,
}

/// Everything `lab serve` starts, and what it needs first.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `DIR/.hardshift/helper`: the TFTP root, dnsmasq's config and leases, the logs.
    pub state: PathBuf,
    pub interface: String,
    /// dnsmasq's config: the bundle's DHCP and DNS configs, the TFTP root made here.
    pub dnsmasq_conf: String,
    /// (name in the TFTP root, what it links to).
    pub tftp: Vec<(String, PathBuf)>,
    pub dnsmasq: Vec<String>,
    pub haproxy: Vec<String>,
    pub http: SocketAddr,
    /// The path part of `lab.httpBaseUrl`.
    pub prefix: String,
    pub needs: Vec<Need>,
    /// Files the nodes will ask for that are not there: each named, and `lab serve` refuses.
    pub missing: Vec<String>,
}

/// `http://IP[:PORT][/path]` → (IP, port, path).
pub fn http_endpoint(url: &str) -> Result<(IpAddr, u16, String), String> {
    let bad = || format!("lab.httpBaseUrl {url:?}: the helper serves it itself and needs http://IP[:PORT][/PATH]");
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/').to_string()),
        None => (rest, String::new()),
    };
    let (ip, port) = if let Some(v6) = host.strip_prefix('[') {
        let (ip, after) = v6.split_once(']').ok_or_else(bad)?;
        (
            ip,
            after
                .strip_prefix(':')
                .map(str::parse)
                .transpose()
                .map_err(|_| bad())?
                .unwrap_or(80),
        )
    } else {
        match host.rsplit_once(':') {
            Some((ip, port)) => (ip, port.parse().map_err(|_| bad())?),
            None => (host, 80),
        }
    };
    Ok((ip.parse().map_err(|_| bad())?, port, path))
}

/// The generated DHCP config with the TFTP root set to `tftp`.
fn with_tftp_root(dhcp: &str, tftp: &Path) -> String {
    dhcp.lines()
        .map(|l| {
            if l.starts_with("tftp-root=") {
                format!("tftp-root={}\n", tftp.display())
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

fn read(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("{}: {e} (run `hardshift create` or `hardshift lab` first)", p.display()))
}

/// The plan for the bundle in `o.dir` with inventory `inv`; Err: the bundle lacks its lab.
pub fn plan(inv: &Inventory, o: &Options) -> Result<Plan, String> {
    let state = o.dir.join(".hardshift/helper");
    let tftp_root = state.join("tftp");
    // The path goes into dnsmasq's config as a line of its own: a newline in it would add lines.
    if tftp_root.to_str().is_none_or(|s| s.chars().any(char::is_control)) {
        return Err(format!(
            "{}: the bundle's directory goes into dnsmasq's config; give one whose path is UTF-8 without control characters",
            o.dir.display()
        ));
    }
    let lab = o.dir.join(layout::LAB);
    let dhcp = read(&lab.join(format!("dnsmasq/{}-dhcp.conf", inv.name)))?;
    let dns = read(&lab.join(format!("dnsmasq/{}-dns.conf", inv.name)))?;
    let interface = match &o.interface {
        Some(i) => i.clone(),
        None => crate::ports::interface_of(inv.helper_ip).unwrap_or_default(),
    };
    let s = |p: &Path| p.display().to_string();
    let dnsmasq = vec![
        "dnsmasq".into(),
        "--keep-in-foreground".into(),
        format!("--conf-file={}", s(&state.join("dnsmasq.conf"))),
        format!("--interface={interface}"),
        "--bind-interfaces".into(),
        // The lab's names only: no upstream resolvers, no /etc/hosts of the helper.
        "--no-resolv".into(),
        "--no-hosts".into(),
        "--pid-file=".into(),
        "--user=root".into(),
        "--log-dhcp".into(),
        "--log-facility=-".into(),
        format!("--dhcp-leasefile={}", s(&state.join("leases"))),
    ];
    // `lab pivot` leaves a mark: a helper started after it keeps the post-pivot config.
    let post_pivot = o.post_pivot || state.join(PIVOTED).exists();
    let haproxy_cfg = lab.join(if post_pivot {
        "haproxy/haproxy-post-pivot.cfg"
    } else {
        "haproxy/haproxy.cfg"
    });
    // The log target first: the bundle's `defaults` take the global loggers defined before them.
    let haproxy = vec![
        "haproxy".into(),
        "-db".into(),
        "-f".into(),
        s(&state.join(HAPROXY_LOG_CFG)),
        "-f".into(),
        s(&haproxy_cfg),
    ];
    let (http_ip, http_port, prefix) = http_endpoint(&inv.http_base_url)?;
    let http = SocketAddr::new(http_ip, http_port);

    let mut missing = Vec::new();
    let mut tftp = Vec::new();
    for f in IPXE_FILES {
        let p = o.ipxe.join(f);
        if !p.is_file() {
            missing.push(format!(
                "{} (the iPXE binary the DHCP config hands out: Debian's `ipxe` package, or --ipxe DIR)",
                p.display()
            ));
        }
        tftp.push((f.to_string(), p));
    }
    tftp.push(("pxelinux.cfg".into(), lab.join("pxe/pxelinux.cfg")));
    match &o.rhcos {
        Some(d) => {
            for f in RHCOS_FILES {
                if !d.join(f).is_file() {
                    missing.push(format!(
                        "{} (RHCOS's live file the boot scripts name: `coreos-installer download -f pxe` or the mirror)",
                        d.join(f).display()
                    ));
                }
            }
            tftp.push(("rhcos".into(), d.clone()));
        }
        None => missing.push("--rhcos DIR: RHCOS's live kernel, initramfs and rootfs, which every node's boot fetches".into()),
    }
    for n in &inv.nodes {
        let p = o.dir.join(format!("ignition/{}.ign", n.name));
        if !p.is_file() {
            missing.push(format!("{} ({}'s config)", p.display(), n.name));
        }
    }
    if !haproxy_cfg.is_file() {
        missing.push(format!("{} (HAProxy's config)", haproxy_cfg.display()));
    }
    if interface.is_empty() {
        missing.push(format!(
            "an interface holding the helper's address {} (lab/scripts/helper-network.sh, the libvirt network, or --interface)",
            inv.helper_ip
        ));
    }

    let any = |port: u16| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
    let mut needs = vec![
        Need {
            proto: Proto::Udp,
            addr: any(67),
            what: "DHCP (dnsmasq)".into(),
        },
        Need {
            proto: Proto::Udp,
            addr: SocketAddr::new(inv.helper_ip, 69),
            what: "TFTP (dnsmasq)".into(),
        },
        Need {
            proto: Proto::Udp,
            addr: SocketAddr::new(inv.helper_ip, 53),
            what: "DNS (dnsmasq)".into(),
        },
        Need {
            proto: Proto::Tcp,
            addr: SocketAddr::new(inv.helper_ip, 53),
            what: "DNS (dnsmasq)".into(),
        },
        Need {
            proto: Proto::Tcp,
            addr: http,
            what: "the boot files (HTTP)".into(),
        },
    ];
    for (port, what) in HAPROXY_PORTS {
        needs.push(Need {
            proto: Proto::Tcp,
            addr: any(port),
            what: what.into(),
        });
    }
    if let Some(addr) = o.collector {
        needs.push(Need {
            proto: Proto::Tcp,
            addr,
            what: "the collector".into(),
        });
    }
    Ok(Plan {
        dnsmasq_conf: format!("{}{dns}", with_tftp_root(&dhcp, &tftp_root)),
        state,
        interface,
        tftp,
        dnsmasq,
        haproxy,
        http,
        prefix,
        needs,
        missing,
    })
}

impl Plan {
    /// What `--dry-run` prints.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("would run: {}\n", self.dnsmasq.join(" ")));
        s.push_str(&format!("would run: {}\n", self.haproxy.join(" ")));
        s.push_str(&format!(
            "would serve: http://{}{}/ (ignition/, pxe/, rhcos/, the agent)\n",
            self.http, self.prefix
        ));
        for (name, target) in &self.tftp {
            s.push_str(&format!("TFTP root: {name} -> {}\n", target.display()));
        }
        for n in &self.needs {
            s.push_str(&format!("needs {} {} ({})\n", n.proto.name(), n.addr, n.what));
        }
        for m in &self.missing {
            s.push_str(&format!("MISSING: {m}\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_is_an_address_a_port_and_a_path() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            http_endpoint("http://192.168.126.1:8080").unwrap(),
            (ip("192.168.126.1"), 8080, String::new())
        );
        assert_eq!(
            http_endpoint("http://192.168.126.1/ocp4/").unwrap(),
            (ip("192.168.126.1"), 80, "/ocp4".into())
        );
        assert_eq!(http_endpoint("http://[fd00::1]:81/x").unwrap(), (ip("fd00::1"), 81, "/x".into()));
        for bad in ["https://192.168.126.1", "http://helper.lab:8080", "http://192.168.126.1:port"] {
            assert!(http_endpoint(bad).unwrap_err().contains("needs http://IP"), "{bad}");
        }
    }

    #[test]
    fn a_directory_with_a_newline_is_refused_before_it_reaches_dnsmasq() {
        // The example's inventory, as `create` writes it (the inventory fuzz target's seed).
        let inv = Inventory::from_json(
            Path::new("inventory.json"),
            include_bytes!("../../fuzz-targets/tests/__fuzz__/inventory/corpus/example"),
        )
        .unwrap();
        let o = Options {
            dir: "/tmp/a\ndhcp-script=/bin/sh".into(),
            rhcos: None,
            ipxe: DEBIAN_IPXE.into(),
            interface: Some("eth0".into()),
            serve_to_any: false,
            collector: None,
            post_pivot: false,
        };
        assert!(plan(&inv, &o).unwrap_err().contains("without control characters"));
    }

    #[test]
    fn the_tftp_root_is_the_helpers() {
        let out = with_tftp_root(
            "enable-tftp\ntftp-root=/var/lib/tftpboot\ndhcp-boot=undionly.kpxe\n",
            Path::new("/b/.hardshift/helper/tftp"),
        );
        assert_eq!(out, "enable-tftp\ntftp-root=/b/.hardshift/helper/tftp\ndhcp-boot=undionly.kpxe\n");
    }
}
