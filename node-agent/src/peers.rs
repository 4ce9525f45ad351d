//! Latency, loss and path MTU to the other nodes of the bundle. ICMP echo over an unprivileged
//! ICMP datagram socket when `net.ipv4.ping_group_range` allows the agent's group, else a raw
//! ICMP socket (the agent runs as root on RHCOS); the path MTU by one don't-fragment echo the
//! size of the route's MTU. Without either socket, TCP connect time to the peer's SSH port
//! (a refusal answers too), and no path MTU. Bounded: PINGS small echoes and one large one per
//! peer, each waited for at most WAIT.

use crate::unread::Unread;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::Component;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

pub const PINGS: u16 = 4;
pub const WAIT: Duration = Duration::from_millis(1000);
/// The assisted installer's bounds: masters 100 ms and no loss; workers 1000 ms and 10 %.
pub const MASTER_LATENCY_MS: f64 = 100.0;
pub const WORKER_LATENCY_MS: f64 = 1000.0;
pub const WORKER_LOSS_PCT: f64 = 10.0;
/// The fallback's port: sshd runs on every RHCOS node.
const TCP_PORT: u16 = 22;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    IcmpDgram,
    IcmpRaw,
    Tcp,
}

impl Method {
    pub fn label(self) -> &'static str {
        match self {
            Method::IcmpDgram => "icmp",
            Method::IcmpRaw => "icmp-raw",
            Method::Tcp => "tcp/22",
        }
    }
}

/// What one peer's probes found.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub sent: u16,
    pub rtts: Vec<Duration>,
    pub method: Method,
    /// The route's MTU and whether a don't-fragment echo of that size came back (None: not
    /// measured).
    pub mtu: Option<(u32, Result<bool, Unread>)>,
}

impl Sample {
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        100.0 * (self.sent as usize - self.rtts.len()) as f64 / self.sent as f64
    }
    pub fn avg_ms(&self) -> Option<f64> {
        (!self.rtts.is_empty()).then(|| self.rtts.iter().map(|d| d.as_secs_f64() * 1000.0).sum::<f64>() / self.rtts.len() as f64)
    }
}

fn set_int(fd: i32, level: i32, name: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: a plain int option on a socket this process owns; the pointer and length describe `v`.
    let r = unsafe { nix::libc::setsockopt(fd, level, name, (&v as *const i32).cast(), std::mem::size_of::<i32>() as u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn get_int(fd: i32, level: i32, name: i32) -> std::io::Result<i32> {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as u32;
    // SAFETY: as above; the kernel writes at most `len` bytes into `v`.
    let r = unsafe { nix::libc::getsockopt(fd, level, name, (&mut v as *mut i32).cast(), &mut len) };
    if r == 0 {
        Ok(v)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// An ICMP socket connected to `addr`: a datagram one if allowed, else raw.
fn icmp_socket(addr: IpAddr) -> std::io::Result<(Socket, Method)> {
    let (domain, proto) = match addr {
        IpAddr::V4(_) => (Domain::IPV4, Protocol::ICMPV4),
        IpAddr::V6(_) => (Domain::IPV6, Protocol::ICMPV6),
    };
    let (s, m) = match Socket::new(domain, Type::DGRAM, Some(proto)) {
        Ok(s) => (s, Method::IcmpDgram),
        Err(_) => (Socket::new(domain, Type::RAW, Some(proto))?, Method::IcmpRaw),
    };
    s.connect(&SockAddr::from(SocketAddr::new(addr, 0)))?;
    // Don't fragment, whatever the route's known path MTU: the large echo tests the path.
    let fd = s.as_raw_fd();
    match addr {
        IpAddr::V4(_) => set_int(fd, nix::libc::IPPROTO_IP, nix::libc::IP_MTU_DISCOVER, nix::libc::IP_PMTUDISC_PROBE)?,
        IpAddr::V6(_) => set_int(
            fd,
            nix::libc::IPPROTO_IPV6,
            nix::libc::IPV6_MTU_DISCOVER,
            nix::libc::IP_PMTUDISC_PROBE,
        )?,
    }
    Ok((s, m))
}

/// An echo request: type, code, checksum, id, seq, payload. The checksum is filled for raw
/// IPv4 (the kernel fills it for datagram sockets and for ICMPv6).
pub fn echo_request(v6: bool, id: u16, seq: u16, payload: usize) -> Vec<u8> {
    let mut p = vec![if v6 { 128 } else { 8 }, 0, 0, 0];
    p.extend(id.to_be_bytes());
    p.extend(seq.to_be_bytes());
    p.extend((0..payload).map(|i| (i % 251) as u8));
    if !v6 {
        let sum = checksum(&p);
        p[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    p
}

/// The Internet checksum (RFC 1071).
pub fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The seq of an echo reply in what a socket read (raw IPv4 sockets get the IP header too).
pub fn reply_seq(buf: &[u8], v6: bool, raw: bool, id: u16) -> Option<u16> {
    let icmp = if raw && !v6 {
        buf.get(usize::from(buf.first()? & 0x0f) * 4..)?
    } else {
        buf
    };
    let want = if v6 { 129 } else { 0 };
    (icmp.len() >= 8 && icmp[0] == want).then_some(())?;
    // Datagram sockets: the kernel owns the id. Raw: ours, as every ICMP packet arrives.
    (!raw || u16::from_be_bytes([icmp[4], icmp[5]]) == id).then_some(())?;
    Some(u16::from_be_bytes([icmp[6], icmp[7]]))
}

/// One echo of `payload` bytes: its round trip, None if no reply within `wait`.
fn echo(s: &Socket, v6: bool, raw: bool, id: u16, seq: u16, payload: usize, wait: Duration) -> std::io::Result<Option<Duration>> {
    let t = Instant::now();
    s.send(&echo_request(v6, id, seq, payload))?;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); payload + 128];
    loop {
        let left = wait.saturating_sub(t.elapsed());
        if left.is_zero() {
            return Ok(None);
        }
        s.set_read_timeout(Some(left))?;
        let n = match s.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return Ok(None),
            Err(e) => return Err(e),
        };
        // SAFETY: recv initialised the first n bytes.
        let got: Vec<u8> = buf[..n].iter().map(|b| unsafe { b.assume_init() }).collect();
        if reply_seq(&got, v6, raw, id) == Some(seq) {
            return Ok(Some(t.elapsed()));
        }
    }
}

fn icmp(addr: IpAddr, pings: u16, wait: Duration) -> std::io::Result<Sample> {
    let (s, method) = icmp_socket(addr)?;
    let (v6, raw) = (addr.is_ipv6(), method == Method::IcmpRaw);
    let id = (std::process::id() & 0xffff) as u16;
    let mut rtts = Vec::new();
    for seq in 1..=pings {
        match echo(&s, v6, raw, id, seq, 56, wait) {
            Ok(Some(d)) => rtts.push(d),
            Ok(None) => {}
            // Unreachable (an ICMP error on a connected socket): lost.
            Err(e)
                if e.raw_os_error()
                    .is_some_and(|c| [nix::libc::EHOSTUNREACH, nix::libc::ENETUNREACH, nix::libc::ECONNREFUSED].contains(&c)) => {}
            Err(e) => return Err(e),
        }
    }
    let route_mtu = match addr {
        IpAddr::V4(_) => get_int(s.as_raw_fd(), nix::libc::IPPROTO_IP, nix::libc::IP_MTU),
        IpAddr::V6(_) => get_int(s.as_raw_fd(), nix::libc::IPPROTO_IPV6, nix::libc::IPV6_MTU),
    };
    // Only worth measuring to a peer that answers at all.
    let mtu = match route_mtu {
        Ok(m) if !rtts.is_empty() => {
            let header = if v6 { 40 + 8 } else { 20 + 8 };
            let r = echo(&s, v6, raw, id, pings + 1, (m as usize).saturating_sub(header), wait)
                .map(|r| r.is_some())
                .map_err(|e| Unread::new(format!("a {m}-byte don't-fragment echo: {e}")));
            Some((m as u32, r))
        }
        _ => None,
    };
    Ok(Sample {
        sent: pings,
        rtts,
        method,
        mtu,
    })
}

fn tcp(addr: IpAddr, pings: u16, wait: Duration) -> Sample {
    let to = SocketAddr::new(addr, TCP_PORT);
    let rtts = (0..pings)
        .filter_map(|_| {
            let t = Instant::now();
            match std::net::TcpStream::connect_timeout(&to, wait) {
                Ok(_) => Some(t.elapsed()),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some(t.elapsed()),
                Err(_) => None,
            }
        })
        .collect();
    Sample {
        sent: pings,
        rtts,
        method: Method::Tcp,
        mtu: None,
    }
}

/// Probes one peer (blocking: run it on a blocking thread). ICMP if this process may, else TCP.
pub fn probe(addr: IpAddr, pings: u16, wait: Duration) -> Sample {
    match icmp(addr, pings, wait) {
        Ok(s) => s,
        Err(_) => tcp(addr, pings, wait),
    }
}

/// Every peer at once, each on its own thread, the whole bounded by `deadline`: a peer not done
/// by then is reported as timed out.
pub async fn probe_all(peers: &[hardshift_agent_config::Peer], deadline: Duration) -> Vec<(hardshift_agent_config::Peer, Option<Sample>)> {
    let tasks: Vec<_> = peers
        .iter()
        .map(|p| {
            let addr = p.addr;
            tokio::time::timeout(deadline, tokio::task::spawn_blocking(move || probe(addr, PINGS, WAIT)))
        })
        .collect();
    let results = futures_util::future::join_all(tasks).await;
    peers
        .iter()
        .cloned()
        .zip(results.into_iter().map(|r| r.ok().and_then(|j| j.ok())))
        .collect()
}

fn describe(s: &Sample) -> String {
    let rtt = s.avg_ms().map(|a| format!("rtt {a:.2} ms")).unwrap_or_else(|| "no answer".into());
    format!("{rtt}, loss {:.0} % of {} ({})", s.loss_pct(), s.sent, s.method.label())
}

/// The `peers` component: loss or latency past the bounds for this node's role fails; a peer
/// that answers nothing at all warns (down, not booted yet, or filtered).
pub fn judge_peers(role: &str, results: &[(hardshift_agent_config::Peer, Option<Sample>)]) -> ComponentState {
    let strict = role != "worker";
    let (max_ms, max_loss) = if strict {
        (MASTER_LATENCY_MS, 0.0)
    } else {
        (WORKER_LATENCY_MS, WORKER_LOSS_PCT)
    };
    let mut details = HashMap::new();
    let (mut fail, mut warn) = (Vec::new(), Vec::new());
    for (p, s) in results {
        let Some(s) = s else {
            details.insert(p.name.clone(), format!("{}: {}", p.addr, hardshift_proto::vocab::state::TIMED_OUT));
            warn.push(format!("{} ({}): the probe timed out", p.name, p.addr));
            continue;
        };
        details.insert(p.name.clone(), format!("{}: {}", p.addr, describe(s)));
        let loss = s.loss_pct();
        if s.rtts.is_empty() {
            warn.push(format!("{} ({}) does not answer ({})", p.name, p.addr, s.method.label()));
        } else if loss > max_loss {
            fail.push(format!(
                "{} ({}): {loss:.0} % packet loss (a {role} allows {max_loss:.0} %)",
                p.name, p.addr
            ));
        } else if let Some(a) = s.avg_ms().filter(|a| *a > max_ms) {
            fail.push(format!(
                "{} ({}): {a:.1} ms round trip (a {role} allows {max_ms:.0} ms)",
                p.name, p.addr
            ));
        }
    }
    let answering = results
        .iter()
        .filter(|(_, s)| s.as_ref().is_some_and(|s| !s.rtts.is_empty()))
        .count();
    let worst = results.iter().filter_map(|(_, s)| s.as_ref()?.avg_ms()).fold(0.0, f64::max);
    let state = if results.is_empty() {
        "no peers".to_string()
    } else {
        format!("{answering}/{} answer, max rtt {worst:.2} ms", results.len())
    };
    let (health, reason) = match (fail.is_empty(), warn.is_empty()) {
        (false, _) => (Health::Failing, [fail, warn].concat().join("; ")),
        (true, false) => (Health::Warning, warn.join("; ")),
        (true, true) => (Health::Ok, String::new()),
    };
    ComponentState {
        name: Component::Peers.name().into(),
        health: health as i32,
        state,
        reason,
        details,
    }
}

/// The `path-mtu` component: a don't-fragment echo the size of the route's MTU lost while
/// small ones come back means a hop with a smaller MTU (the assisted installer's mtu-valid).
pub fn judge_mtu(results: &[(hardshift_agent_config::Peer, Option<Sample>)]) -> ComponentState {
    let mut details = HashMap::new();
    let mut fail = Vec::new();
    let mut measured = 0;
    let mut tcp_only = false;
    for (p, s) in results {
        let Some(s) = s else { continue };
        tcp_only |= s.method == Method::Tcp;
        match &s.mtu {
            Some((m, Ok(true))) => {
                measured += 1;
                details.insert(p.name.clone(), format!("{m} bytes pass"));
            }
            Some((m, Ok(false))) => {
                measured += 1;
                details.insert(p.name.clone(), format!("{m} bytes lost"));
                fail.push(format!(
                    "{} ({}): a {m}-byte don't-fragment echo is lost while small ones answer: a hop on the way has a smaller MTU",
                    p.name, p.addr
                ));
            }
            Some((m, Err(e))) => {
                measured += 1;
                details.insert(p.name.clone(), format!("{m} bytes: {e}"));
                fail.push(format!("{} ({}): {e}", p.name, p.addr));
            }
            None => {}
        }
    }
    let (health, state, reason) = if !fail.is_empty() {
        (
            Health::Failing,
            format!("{} of {measured} peers: MTU too large for the path", fail.len()),
            fail.join("; "),
        )
    } else if measured > 0 {
        (Health::Ok, format!("{measured} peers: MTU passes"), String::new())
    } else if tcp_only {
        (
            Health::Unknown,
            "not measured".into(),
            "no ICMP socket for this process: TCP connect time only".into(),
        )
    } else {
        (Health::Unknown, "not measured".into(), "no peer answered".into())
    };
    ComponentState {
        name: Component::PathMtu.name().into(),
        health: health as i32,
        state,
        reason,
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_agent_config::Peer;

    fn peer(name: &str, addr: &str) -> Peer {
        Peer {
            name: name.into(),
            role: "master".into(),
            addr: addr.parse().unwrap(),
        }
    }

    fn sample(rtts_ms: &[u64], mtu: Option<(u32, Result<bool, Unread>)>) -> Option<Sample> {
        Some(Sample {
            sent: PINGS,
            rtts: rtts_ms.iter().map(|m| Duration::from_millis(*m)).collect(),
            method: Method::IcmpRaw,
            mtu,
        })
    }

    #[test]
    fn checksums_and_replies() {
        // RFC 1071's example.
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
        let req = echo_request(false, 0x1234, 7, 56);
        assert_eq!(checksum(&req), 0, "a request with its checksum sums to zero");
        // A raw IPv4 socket reads the IP header (IHL 5) before the reply.
        let mut reply = vec![0x45; 20];
        reply.extend([0, 0, 0, 0, 0x12, 0x34, 0, 7]);
        assert_eq!(reply_seq(&reply, false, true, 0x1234), Some(7));
        assert_eq!(reply_seq(&reply, false, true, 0x9999), None, "another process's echo");
        assert_eq!(reply_seq(&reply[20..], false, false, 0), Some(7));
        assert_eq!(reply_seq(&[8, 0, 0, 0, 0, 0, 0, 1], false, false, 0), None, "a request is no reply");
    }

    #[test]
    fn loss_and_latency_by_role() {
        let ok = vec![(peer("master-1", "192.168.126.102"), sample(&[1, 1, 2, 1], Some((1500, Ok(true)))))];
        assert_eq!(judge_peers("master", &ok).health, Health::Ok as i32);
        let lossy = vec![(peer("master-1", "192.168.126.102"), sample(&[1, 1, 2], None))];
        let c = judge_peers("master", &lossy);
        assert_eq!(c.health, Health::Failing as i32);
        assert!(c.reason.contains("25 % packet loss (a master allows 0 %)"), "{}", c.reason);
        assert_eq!(judge_peers("worker", &lossy).health, Health::Failing as i32, "25 % > 10 %");
        let slow = vec![(peer("master-1", "192.168.126.102"), sample(&[150, 160, 170, 180], None))];
        assert!(judge_peers("master", &slow).reason.contains("165.0 ms round trip"));
        assert_eq!(judge_peers("worker", &slow).health, Health::Ok as i32);
        let down = vec![
            (peer("master-2", "192.168.126.103"), sample(&[], None)),
            (peer("m3", "10.0.0.1"), None),
        ];
        let c = judge_peers("master", &down);
        assert_eq!(c.health, Health::Warning as i32);
        assert!(c.details["m3"].contains("unknown: timed out"), "{:?}", c.details);
        let m = judge_mtu(&[(peer("master-1", "192.168.126.102"), sample(&[1], Some((9000, Ok(false)))))]);
        assert_eq!(m.health, Health::Failing as i32);
        assert!(m.reason.contains("9000-byte don't-fragment echo is lost"), "{}", m.reason);
    }

    /// The real thing on loopback: echoes come back, and so does one the size of lo's MTU.
    #[test]
    fn real_echoes_on_loopback() {
        let s = probe("127.0.0.1".parse().unwrap(), 2, WAIT);
        assert_eq!(s.rtts.len(), 2, "{s:?}");
        if s.method != Method::Tcp {
            assert!(matches!(s.mtu, Some((_, Ok(true)))), "{s:?}");
        }
    }

    fn sh(cmd: &str) {
        let o = std::process::Command::new("sh").args(["-c", cmd]).output().unwrap();
        assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
    }

    /// A real path with a hop of a smaller MTU: two network namespaces joined by a veth pair,
    /// this side's MTU raised to 9000 while the peer's stays 1500 (the kernel drops frames
    /// larger than the receiving side's MTU, as a switch or a bridge with the smaller MTU does).
    /// Small echoes pass, the don't-fragment one the size of the route's MTU is lost. Runs the
    /// test again inside `unshare -n` (root, as the agent), so the machine's network is untouched.
    #[test]
    fn a_real_path_with_a_smaller_mtu() {
        const NAME: &str = "peers::tests::a_real_path_with_a_smaller_mtu";
        if std::env::var_os("HARDSHIFT_TEST_NETNS").is_none() {
            let out = std::process::Command::new("unshare")
                .args(["-n", "--"])
                .arg(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env("HARDSHIFT_TEST_NETNS", "1")
                .output()
                .expect("unshare (util-linux)");
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && text.contains("1 passed"), "{text}");
            return;
        }
        // The peer's namespace, held by a process that sleeps in it.
        let mut holder = std::process::Command::new("unshare").args(["-n", "sleep", "120"]).spawn().unwrap();
        let pid = holder.id();
        let mine = std::fs::read_link("/proc/self/ns/net").unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_link(format!("/proc/{pid}/ns/net")).ok().is_none_or(|n| n == mine) {
            assert!(Instant::now() < deadline, "the peer's namespace never appeared");
            std::thread::sleep(Duration::from_millis(10));
        }
        sh(&format!("ip link add v0 type veth peer name v1 && ip link set v1 netns {pid} && ip addr add 10.77.0.1/24 dev v0 && ip link set v0 up && ip link set lo up"));
        sh(&format!(
            "nsenter -t {pid} -n sh -c 'ip addr add 10.77.0.2/24 dev v1 && ip link set v1 up && ip link set lo up'"
        ));
        let peer = Peer {
            name: "master-1".into(),
            role: "master".into(),
            addr: "10.77.0.2".parse().unwrap(),
        };
        // The link needs a moment to come up: the first answer is waited for, not assumed.
        let mut s = probe(peer.addr, PINGS, WAIT);
        while s.rtts.is_empty() && Instant::now() < deadline {
            s = probe(peer.addr, PINGS, WAIT);
        }
        assert_eq!(s.mtu, Some((1500, Ok(true))), "{s:?}");
        assert_eq!(judge_mtu(&[(peer.clone(), Some(s))]).health, Health::Ok as i32);
        sh("ip link set v0 mtu 9000");
        let s = probe(peer.addr, PINGS, WAIT);
        assert!(!s.rtts.is_empty(), "small echoes still pass: {s:?}");
        assert_eq!(s.mtu, Some((9000, Ok(false))), "{s:?}");
        let m = judge_mtu(&[(peer.clone(), Some(s))]);
        assert_eq!(m.health, Health::Failing as i32, "{m:?}");
        assert!(m.reason.contains("9000-byte don't-fragment echo is lost"), "{}", m.reason);
        // A peer that is not there: no answer at all, a warning (down or not booted yet).
        let gone = Peer {
            addr: "10.77.0.9".parse().unwrap(),
            ..peer
        };
        let s = probe(gone.addr, 2, Duration::from_millis(300));
        assert!(s.rtts.is_empty(), "{s:?}");
        assert_eq!(judge_peers("master", &[(gone, Some(s))]).health, Health::Warning as i32);
        let _ = holder.kill();
        let _ = holder.wait();
    }
}
