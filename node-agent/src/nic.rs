//! The node's network as the kernel sees it: NICs from sysfs (link, speed, MTU, error and
//! carrier-change counters, bonds and their active member), the default routes from
//! /proc/net/route and /proc/net/ipv6_route, and the addresses against the bundle's machine
//! network. Read from any directory shaped like `/` (`read`), so the parsers and judges are
//! tested on trees recorded from real machines (fixtures/).

use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{self, Component};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// At most this many interfaces are read and reported (a node can have a veth per pod).
const MAX_NICS: usize = 32;
/// Receive or transmit errors past this on a NIC in use: a cable, a transceiver or a duplex mismatch.
pub const ERRORS_WARN: u64 = 100;
/// Link changes past this on a NIC in use: the link flaps.
pub const FLAPS_WARN: u64 = 10;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bond {
    pub mode: String,
    pub active: Option<String>,
    pub members: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nic {
    pub name: String,
    /// None: the kernel would not say (an interface that is administratively down).
    pub carrier: Option<bool>,
    pub operstate: String,
    /// Mb/s; None when the driver does not know (virtio says -1).
    pub speed: Option<u64>,
    pub mtu: u32,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub carrier_changes: u64,
    /// A hardware device backs it (not a bridge, veth or tunnel).
    pub physical: bool,
    /// The bond or bridge it is a member of.
    pub master: Option<String>,
    pub bond: Option<Bond>,
}

/// A default route: its family, device and gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub dev: String,
    pub gateway: Option<IpAddr>,
}

/// What was read of the network: the input of every judge here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub nics: Vec<Nic>,
    pub routes: Vec<Route>,
    pub addresses: Vec<IpAddr>,
}

fn text(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn num(p: &Path) -> u64 {
    text(p).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// One interface's directory under /sys/class/net.
pub fn read_nic(dir: &Path) -> Nic {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stat = |f: &str| num(&dir.join("statistics").join(f));
    let link_name = |l: &str| {
        std::fs::read_link(dir.join(l))
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let bond = dir.join("bonding").is_dir().then(|| Bond {
        mode: text(&dir.join("bonding/mode"))
            .and_then(|m| m.split_whitespace().next().map(String::from))
            .unwrap_or_default(),
        active: text(&dir.join("bonding/active_slave")).filter(|a| !a.is_empty()),
        members: text(&dir.join("bonding/slaves"))
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default(),
    });
    Nic {
        carrier: text(&dir.join("carrier")).map(|c| c == "1"),
        operstate: text(&dir.join("operstate")).unwrap_or_default(),
        speed: text(&dir.join("speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|s| *s > 0)
            .map(|s| s as u64),
        mtu: num(&dir.join("mtu")) as u32,
        rx_errors: stat("rx_errors"),
        tx_errors: stat("tx_errors"),
        rx_dropped: stat("rx_dropped"),
        tx_dropped: stat("tx_dropped"),
        carrier_changes: num(&dir.join("carrier_changes")),
        physical: std::fs::symlink_metadata(dir.join("device")).is_ok(),
        master: link_name("master"),
        bond,
        name,
    }
}

/// The default routes in /proc/net/route's text (hex, host byte order, as the kernel prints them).
pub fn default_routes_v4(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (dev, dest, gw, flags, mask) = (f.first()?, f.get(1)?, f.get(2)?, f.get(3)?, f.get(7)?);
            let up = u32::from_str_radix(flags, 16).ok()? & 0x1 != 0;
            (up && *dest == "00000000" && *mask == "00000000").then_some(())?;
            let g = u32::from_str_radix(gw, 16).ok()?;
            Some(Route {
                dev: dev.to_string(),
                gateway: (g != 0).then(|| IpAddr::V4(Ipv4Addr::from(g.to_le_bytes()))),
            })
        })
        .collect()
}

fn v6(hex: &str) -> Option<Ipv6Addr> {
    u128::from_str_radix(hex, 16).ok().filter(|_| hex.len() == 32).map(Ipv6Addr::from)
}

/// The default routes in /proc/net/ipv6_route's text (::/0, up, not a reject route).
pub fn default_routes_v6(text: &str) -> Vec<Route> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (dest, len, gw, flags, dev) = (f.first()?, f.get(1)?, f.get(4)?, f.get(8)?, f.get(9)?);
            let flags = u32::from_str_radix(flags, 16).ok()?;
            // RTF_UP, and not RTF_REJECT (the kernel's unreachable default on a host without one).
            (flags & 0x1 != 0 && flags & 0x200 == 0 && *len == "00" && v6(dest)? == Ipv6Addr::UNSPECIFIED && *dev != "lo").then_some(())?;
            let g = v6(gw)?;
            Some(Route {
                dev: dev.to_string(),
                gateway: (!g.is_unspecified()).then_some(IpAddr::V6(g)),
            })
        })
        .collect()
}

/// The global IPv6 addresses in /proc/net/if_inet6 (link-local and loopback left out).
pub fn addresses_v6(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let a = v6(f.first()?)?;
            let scope = u8::from_str_radix(f.get(3)?, 16).ok()?;
            (scope == 0).then_some(IpAddr::V6(a))
        })
        .collect()
}

/// The local IPv4 addresses in /proc/net/fib_trie (loopback left out).
pub fn addresses_v4(fib: &str) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = fib
        .lines()
        .zip(fib.lines().skip(1))
        .filter(|(_, next)| next.contains("/32 host LOCAL"))
        .filter_map(|(l, _)| l.trim().strip_prefix("|-- ")?.parse::<Ipv4Addr>().ok())
        .filter(|a| !a.is_loopback())
        .map(IpAddr::V4)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Everything, from a `/`-shaped directory: the interfaces worth reporting (hardware, bonds,
/// those carrying a default route and what they are made of), the routes and the addresses.
pub fn read(root: &Path) -> Snapshot {
    let proc = |f: &str| std::fs::read_to_string(root.join("proc/net").join(f)).unwrap_or_default();
    let mut routes = default_routes_v4(&proc("route"));
    routes.extend(default_routes_v6(&proc("ipv6_route")));
    let mut addresses = addresses_v4(&proc("fib_trie"));
    addresses.extend(addresses_v6(&proc("if_inet6")));
    let net = root.join("sys/class/net");
    let mut names: Vec<String> = std::fs::read_dir(&net)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    let all: Vec<Nic> = names.iter().take(4 * MAX_NICS).map(|n| read_nic(&net.join(n))).collect();
    let wanted = |n: &Nic| {
        n.physical
            || n.bond.is_some()
            || routes
                .iter()
                .any(|r| r.dev == n.name || all.iter().any(|m| m.name == r.dev && n.master.as_deref() == Some(&r.dev)))
    };
    let nics = all.iter().filter(|n| wanted(n)).take(MAX_NICS).cloned().collect();
    Snapshot { nics, routes, addresses }
}

/// One NIC in a line: what `status` and the dashboard show.
pub fn describe(n: &Nic) -> String {
    let link = match n.carrier {
        Some(true) => "link up".to_string(),
        Some(false) => "no link".to_string(),
        None => format!("{} (no carrier reported)", n.operstate),
    };
    let speed = n.speed.map(|s| format!(" {s} Mb/s")).unwrap_or_default();
    let mut s = format!(
        "{link}{speed} mtu {} errors rx {} tx {} dropped rx {} tx {} link changes {}",
        n.mtu, n.rx_errors, n.tx_errors, n.rx_dropped, n.tx_dropped, n.carrier_changes
    );
    if let Some(b) = &n.bond {
        s.push_str(&format!(
            "; bond {} members {} active {}",
            b.mode,
            if b.members.is_empty() { "none".into() } else { b.members.join(",") },
            b.active.as_deref().unwrap_or("none")
        ));
    }
    if let Some(m) = &n.master {
        s.push_str(&format!("; member of {m}"));
    }
    s
}

/// The `nic` component: a NIC carrying a default route without link, or a bond with no member
/// up, fails; a bond member down, errors or a flapping link on a NIC in use warn.
pub fn judge_nics(s: &Snapshot) -> ComponentState {
    let details: HashMap<String, String> = s.nics.iter().map(|n| (n.name.clone(), describe(n))).collect();
    if s.nics.is_empty() {
        return vocab::component(Component::Nic, Health::Unknown, "no interface found", String::new()).with_details(details);
    }
    let in_use =
        |n: &Nic| s.routes.iter().any(|r| r.dev == n.name) || n.master.as_ref().is_some_and(|m| s.routes.iter().any(|r| &r.dev == m));
    let by_name = |name: &str| s.nics.iter().find(|n| n.name == name);
    let mut failing = Vec::new();
    let mut warning = Vec::new();
    for n in &s.nics {
        if s.routes.iter().any(|r| r.dev == n.name) && n.carrier != Some(true) {
            failing.push(format!("{} carries the default route and has no link ({})", n.name, n.operstate));
        }
        if let Some(b) = &n.bond {
            let up: Vec<&String> = b
                .members
                .iter()
                .filter(|m| by_name(m).is_some_and(|x| x.carrier == Some(true)))
                .collect();
            if up.is_empty() {
                failing.push(format!(
                    "bond {} has no member with link (members: {})",
                    n.name,
                    b.members.join(", ")
                ));
            } else if up.len() < b.members.len() {
                let down: Vec<&String> = b.members.iter().filter(|m| !up.contains(m)).collect();
                warning.push(format!(
                    "bond {}: {} without link, no redundancy left",
                    n.name,
                    down.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
            if b.mode == "active-backup" && b.active.is_none() {
                failing.push(format!("bond {} (active-backup) has no active member", n.name));
            }
        }
        if in_use(n) && n.rx_errors + n.tx_errors >= ERRORS_WARN {
            warning.push(format!(
                "{}: {} receive and {} transmit errors since boot",
                n.name, n.rx_errors, n.tx_errors
            ));
        }
        if in_use(n) && n.carrier_changes >= FLAPS_WARN {
            warning.push(format!(
                "{}: the link changed {} times since boot (flapping)",
                n.name, n.carrier_changes
            ));
        }
    }
    let primary = s.routes.first().and_then(|r| by_name(&r.dev)).or(s.nics.first());
    let state = primary
        .map(|n| {
            let link = if n.carrier == Some(true) { "up" } else { "no link" };
            format!(
                "{} {link}{} mtu {}",
                n.name,
                n.speed.map(|s| format!(" {s} Mb/s")).unwrap_or_default(),
                n.mtu
            )
        })
        .unwrap_or_default();
    let (health, reason) = if !failing.is_empty() {
        (Health::Failing, [failing, warning].concat().join("; "))
    } else if !warning.is_empty() {
        (Health::Warning, warning.join("; "))
    } else {
        (Health::Ok, String::new())
    };
    vocab::component(Component::Nic, health, state, reason).with_details(details)
}

/// The `route` component: no default route at all fails (the assisted installer's
/// has-default-route: images, NTP and DNS beyond the machine network are out of reach).
pub fn judge_route(s: &Snapshot) -> ComponentState {
    let details: HashMap<String, String> = s
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let via = r.gateway.map(|g| format!("via {g} ")).unwrap_or_default();
            (
                format!("default{}", if i == 0 { String::new() } else { format!("-{i}") }),
                format!("{via}dev {}", r.dev),
            )
        })
        .collect();
    match s.routes.first() {
        None => vocab::component(
            Component::Route,
            Health::Failing,
            "no default route",
            "neither /proc/net/route nor /proc/net/ipv6_route has a default route",
        )
        .with_details(details),
        Some(r) => vocab::component(
            Component::Route,
            Health::Ok,
            format!(
                "default{} dev {}",
                r.gateway.map(|g| format!(" via {g}")).unwrap_or_default(),
                r.dev
            ),
            String::new(),
        )
        .with_details(details),
    }
}

/// The `machine-network` component: the node holds the address the bundle gives it, and an
/// address in the machine network (the assisted installer's belongs-to-machine-cidr).
pub fn judge_machine_network(addresses: &[IpAddr], networks: &[ipnet::IpNet], expected: Option<IpAddr>) -> ComponentState {
    let list = |v: &[IpAddr]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ");
    let mut details = HashMap::from([("addresses".to_string(), list(addresses))]);
    details.insert(
        "machine_network".into(),
        networks.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
    );
    if let Some(e) = expected {
        details.insert("expected".into(), e.to_string());
    }
    let inside: Vec<IpAddr> = addresses
        .iter()
        .copied()
        .filter(|a| networks.iter().any(|n| n.contains(a)))
        .collect();
    let mut problems = Vec::new();
    if !networks.is_empty() && inside.is_empty() {
        problems.push(format!(
            "no address in the machine network {} (the node has: {})",
            details["machine_network"],
            if addresses.is_empty() { "none".into() } else { list(addresses) }
        ));
    }
    if let Some(e) = expected.filter(|e| !addresses.contains(e)) {
        problems.push(format!("the bundle gives this node {e}, which it does not hold"));
    }
    let state = if inside.is_empty() {
        "outside".to_string()
    } else {
        format!("{} in the machine network", list(&inside))
    };
    match problems.is_empty() {
        true => vocab::component(Component::MachineNetwork, Health::Ok, state, String::new()).with_details(details),
        false => vocab::component(Component::MachineNetwork, Health::Failing, state, problems.join("; ")).with_details(details),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
    }

    /// A tree recorded from a real machine (a KVM guest: virtio eth0, a podman bridge without
    /// link, an ifb, loopback; an IPv4 and an IPv6 default route).
    #[test]
    fn a_recorded_machine() {
        let s = read(&fixture("this-machine"));
        let names: Vec<&str> = s.nics.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["eth0"], "virtual interfaces without a route are left out");
        let eth0 = &s.nics[0];
        assert_eq!((eth0.carrier, eth0.speed, eth0.mtu, eth0.physical), (Some(true), None, 1400, true));
        assert_eq!(eth0.carrier_changes, 2);
        assert_eq!(
            s.routes,
            [
                Route {
                    dev: "eth0".into(),
                    gateway: Some("192.0.2.1".parse().unwrap())
                },
                Route {
                    dev: "eth0".into(),
                    gateway: Some("fd00::1".parse().unwrap())
                }
            ]
        );
        assert!(s.addresses.contains(&"192.0.2.2".parse().unwrap()), "{:?}", s.addresses);
        assert!(s.addresses.contains(&"fd00::2".parse().unwrap()), "{:?}", s.addresses);
        assert!(
            !s.addresses.iter().any(|a| a.to_string().starts_with("fe80")),
            "link-local left out"
        );
        let n = judge_nics(&s);
        assert_eq!((n.health, n.state.as_str()), (Health::Ok as i32, "eth0 up mtu 1400"), "{n:?}");
        assert!(n.details["eth0"].contains("link up mtu 1400"), "{:?}", n.details);
        let r = judge_route(&s);
        assert_eq!((r.health, r.state.as_str()), (Health::Ok as i32, "default via 192.0.2.1 dev eth0"));
        let m = judge_machine_network(&s.addresses, &["192.0.2.0/24".parse().unwrap()], Some("192.0.2.2".parse().unwrap()));
        assert_eq!(m.health, Health::Ok as i32, "{m:?}");
    }

    /// The recorded tree with eth0's link gone and its routes removed (the files the kernel
    /// writes then: carrier 0, no default route lines).
    #[test]
    fn no_link_and_no_route() {
        let mut s = read(&fixture("this-machine"));
        s.nics[0].carrier = Some(false);
        s.nics[0].operstate = "down".into();
        let n = judge_nics(&s);
        assert_eq!(n.health, Health::Failing as i32);
        assert!(n.reason.contains("eth0 carries the default route and has no link"), "{}", n.reason);
        let route = std::fs::read_to_string(fixture("this-machine/proc/net/route")).unwrap();
        let kept: String = route
            .lines()
            .filter(|l| !l.contains("\t00000000\t"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(default_routes_v4(&kept).is_empty());
        let v6 = std::fs::read_to_string(fixture("this-machine/proc/net/ipv6_route")).unwrap();
        let kept6: String = v6
            .lines()
            .filter(|l| !l.starts_with("00000000000000000000000000000000 00"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(default_routes_v6(&kept6).is_empty());
        s.routes.clear();
        let r = judge_route(&s);
        assert_eq!((r.health, r.state.as_str()), (Health::Failing as i32, "no default route"));
    }

    /// The kernel's unreachable default on a host with no IPv6 route (`ip -6 route` shows none):
    /// RTF_REJECT on lo, not a default route.
    #[test]
    fn the_kernels_reject_route_is_not_a_default() {
        let text = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert!(default_routes_v6(text).is_empty());
    }

    /// A bond as the kernel's bonding driver lays it out in sysfs (Documentation/networking/
    /// bonding.rst): bonding/{mode,slaves,active_slave}, members with a `master` link.
    #[test]
    fn a_bond_with_a_member_down() {
        let s = read(&fixture("bond"));
        let bond = s.nics.iter().find(|n| n.name == "bond0").unwrap();
        assert_eq!(
            bond.bond,
            Some(Bond {
                mode: "active-backup".into(),
                active: Some("ens3f0".into()),
                members: vec!["ens3f0".into(), "ens3f1".into()]
            })
        );
        let n = judge_nics(&s);
        assert_eq!(n.health, Health::Warning as i32, "{n:?}");
        assert!(n.reason.contains("bond bond0: ens3f1 without link"), "{}", n.reason);
        assert!(n.details["ens3f1"].contains("member of bond0"), "{:?}", n.details);
        // Both members down and nothing active: the bond carries nothing.
        let mut s2 = s.clone();
        for x in s2.nics.iter_mut() {
            if x.name == "ens3f0" {
                x.carrier = Some(false);
            }
            if let Some(b) = &mut x.bond {
                b.active = None;
            }
        }
        let n = judge_nics(&s2);
        assert_eq!(n.health, Health::Failing as i32);
        assert!(
            n.reason.contains("no member with link") && n.reason.contains("no active member"),
            "{}",
            n.reason
        );
    }

    #[test]
    fn errors_and_flaps_on_a_nic_in_use_warn() {
        let mut s = read(&fixture("this-machine"));
        s.nics[0].rx_errors = ERRORS_WARN;
        s.nics[0].carrier_changes = FLAPS_WARN + 4;
        let n = judge_nics(&s);
        assert_eq!(n.health, Health::Warning as i32);
        assert!(
            n.reason.contains("100 receive") && n.reason.contains("changed 14 times"),
            "{}",
            n.reason
        );
    }

    #[test]
    fn an_address_outside_the_machine_network_or_not_the_bundles() {
        let a: Vec<IpAddr> = vec!["10.0.0.5".parse().unwrap()];
        let m = judge_machine_network(&a, &["192.168.126.0/24".parse().unwrap()], Some("192.168.126.101".parse().unwrap()));
        assert_eq!(m.health, Health::Failing as i32);
        assert!(
            m.reason
                .contains("no address in the machine network 192.168.126.0/24 (the node has: 10.0.0.5)"),
            "{}",
            m.reason
        );
        assert!(m.reason.contains("gives this node 192.168.126.101"), "{}", m.reason);
    }
}
