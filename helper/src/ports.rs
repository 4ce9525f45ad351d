//! Before anything starts: every port the helper needs is free, and when one is not, which
//! process holds it (libvirt's own dnsmasq on the bridge is the usual one). Read from the kernel:
//! the socket tables in /proc/net and each process's descriptors.

use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// One port a program of the helper will bind, and what for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub proto: Proto,
    pub addr: SocketAddr,
    pub what: String,
}

/// Why a port cannot be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub need: Need,
    /// "pid 812 (dnsmasq)", or what the kernel said when no holder is found.
    pub holder: String,
}

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ({}): {}",
            self.need.proto.name(),
            self.need.addr,
            self.need.what,
            self.holder
        )
    }
}

/// Each needed port bound for a moment and let go; those that cannot be, with their holder.
pub fn check(needs: &[Need]) -> Vec<Taken> {
    needs
        .iter()
        .filter_map(|n| {
            let r = match n.proto {
                Proto::Tcp => TcpListener::bind(n.addr).map(drop),
                Proto::Udp => UdpSocket::bind(n.addr).map(drop),
            };
            let e = r.err()?;
            let holder = match e.kind() {
                std::io::ErrorKind::AddrInUse => holders(n.proto, n.addr.port()).first().map_or_else(
                    || "in use (by a process this user cannot see)".to_string(),
                    |(pid, comm)| format!("held by pid {pid} ({comm})"),
                ),
                std::io::ErrorKind::AddrNotAvailable => format!(
                    "no interface here holds {} (lab/scripts/helper-network.sh puts the VIPs on the lab bridge)",
                    n.addr.ip()
                ),
                std::io::ErrorKind::PermissionDenied => "permission denied (run `lab serve` as root)".to_string(),
                _ => e.to_string(),
            };
            Some(Taken { need: n.clone(), holder })
        })
        .collect()
}

/// The sockets bound to `port` (listening, for TCP) by inode, from /proc/net/{tcp,udp}{,6}.
fn inodes(proto: Proto, port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for v6 in ["", "6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/net/{}{v6}", proto.name())) else {
            continue;
        };
        out.extend(socket_inodes(&text, proto, port));
    }
    out
}

/// The inodes of `text`'s sockets on local `port` (TCP: in LISTEN). Pure.
pub fn socket_inodes(text: &str, proto: Proto, port: u16) -> Vec<u64> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local = f.get(1)?;
            let p = u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()?;
            let listening = proto == Proto::Udp || f.get(3) == Some(&"0A");
            (p == port && listening).then(|| f.get(9)?.parse().ok()).flatten()
        })
        .collect()
}

/// (pid, command) of each process holding a socket on `port`.
pub fn holders(proto: Proto, port: u16) -> Vec<(u32, String)> {
    let wanted: Vec<String> = inodes(proto, port).iter().map(|i| format!("socket:[{i}]")).collect();
    if wanted.is_empty() {
        return vec![];
    }
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| wanted.iter().any(|w| t.as_os_str() == w.as_str())));
        if holds {
            let comm = std::fs::read_to_string(p.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string();
            out.push((pid, comm));
        }
    }
    out
}

/// The interface holding `ip`, if one does here.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for a in addrs {
        let Some(sa) = a.address else { continue };
        let found = match (sa.as_sockaddr_in(), sa.as_sockaddr_in6()) {
            (Some(v4), _) => IpAddr::V4(v4.ip()) == ip,
            (_, Some(v6)) => IpAddr::V6(v6.ip()) == ip,
            _ => false,
        };
        if found {
            return Some(a.interface_name);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/net/tcp as the kernel writes it: a listener on :53 (0x0035) and a connection from it.
    #[test]
    fn sockets_on_a_port_from_the_kernels_table() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 23456 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0035 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 23457 1 0000000000000000 20 4 30 10 -1
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 23458 1 0000000000000000 100 0 0 10 0
";
        assert_eq!(socket_inodes(tcp, Proto::Tcp, 53), [23456]);
        assert_eq!(socket_inodes(tcp, Proto::Tcp, 8080), [23458]);
        assert_eq!(socket_inodes(tcp, Proto::Udp, 53), [23456, 23457]);
        assert!(socket_inodes(tcp, Proto::Tcp, 443).is_empty());
    }

    /// A port this test holds is named as this process's.
    #[test]
    fn a_held_port_names_its_holder() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let taken = check(&[Need {
            proto: Proto::Tcp,
            addr,
            what: "test".into(),
        }]);
        assert_eq!(taken.len(), 1);
        let me = std::process::id();
        assert!(taken[0].holder.contains(&format!("pid {me} ")), "{}", taken[0]);
        drop(l);
        assert!(check(&[Need {
            proto: Proto::Tcp,
            addr,
            what: "test".into()
        }])
        .is_empty());
        let missing = check(&[Need {
            proto: Proto::Tcp,
            addr: "192.0.2.77:6443".parse().unwrap(),
            what: "api".into(),
        }]);
        assert!(missing[0].holder.contains("no interface here holds 192.0.2.77"), "{}", missing[0]);
        assert_eq!(interface_of("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
    }
}
