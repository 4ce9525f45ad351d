//! Faults a lab can be started with (`--fault NAME[:NODE]`), each one a real change to what the
//! lab serves, so a booted node meets it as it would in a real datacenter. Pure: a fault
//! rewrites the generated dnsmasq DNS config or changes how a node's VM is made; the lab applies
//! the result.
//!
//! Made real here: `dns-wildcard` (every name under the cluster's domain resolves),
//! `no-ptr:NODE` (the node's name resolves, its address does not resolve back) and `mtu:NODE`
//! (the node's NIC set for jumbo frames on a switch that passes 1500 bytes), `slow-disk:NODE`
//! (QEMU throttles the node's disk writes). Latency and loss need the kernel's netem qdisc, which
//! this machine's kernel lacks (CONFIG_NET_SCH_NETEM unset): the boot test makes them inside a
//! guest, whose Debian kernel has it.

use anyhow::Context;
use std::str::FromStr;

/// The address a wildcard answers with: inside the machine network's /24 of the example labs,
/// and no node's, VIP's or helper's.
pub const WILDCARD_ANSWER_HOST: u8 = 250;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The lab's DNS answers every name under the cluster's domain (`*.cluster.domain`).
    DnsWildcard,
    /// The node's A record stays, its PTR record goes.
    NoPtr(String),
    /// The node's NIC has an MTU of `JUMBO` (the VM's virtio NIC says so to the guest, as a
    /// jumbo-frame NIC would); the lab's bridge and every other port stay at 1500. TCP still
    /// works (each side's MSS bounds the other's segments): only frames over 1500 bytes are lost.
    Mtu(String),
    /// The node's disk takes `SLOW_WRITE_IOPS` writes a second, steadily (no burst): a disk
    /// shared with a noisy neighbour, or a thin-provisioned volume, under etcd's WAL. Each
    /// fdatasync then waits for several writes (data, journal, commit).
    SlowDisk(String),
    /// The node has no default route: the gateway goes from its `ip=` kernel argument and from
    /// its NetworkManager keyfiles (its config as the lab serves it). It reaches its own subnet
    /// only (the lab's helper, DNS and collector are on it), as a node whose gateway field was
    /// left empty would.
    NoDefaultRoute(String),
    /// The node's firmware boots the network before its disk: once its live system has written
    /// the disk and rebooted, it PXE-boots the live system again.
    LiveAgain(String),
    /// The node's firmware boots its disk first and never tries the network (a disk left from an
    /// earlier install, or the boot order): the helper never hears from it.
    DiskFirst(String),
}

pub const NAMES: &str = "dns-wildcard, no-ptr:NODE, mtu:NODE, slow-disk:NODE, no-default-route:NODE, live-again:NODE, disk-first:NODE";

/// Write operations a second of a disk under `slow-disk:NODE`: an fdatasync of etcd's WAL then
/// takes about 100 ms where etcd needs under 10 ms, while the boot's writes (merged by the page
/// cache) still pass.
pub const SLOW_WRITE_IOPS: u32 = 25;

/// The MTU of a node's NIC under `mtu:NODE`.
pub const JUMBO: u32 = 9000;

impl FromStr for Fault {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Fault> {
        let (name, node) = match s.split_once(':') {
            Some((n, node)) => (n, Some(node)),
            None => (s, None),
        };
        let needs_node = |node: Option<&str>| match node {
            Some(n) if !n.is_empty() => Ok(n.to_string()),
            _ => Err(anyhow::anyhow!("--fault {s:?}: {name} needs a node (--fault {name}:master-0)")),
        };
        match name {
            "dns-wildcard" => match node {
                None => Ok(Fault::DnsWildcard),
                Some(_) => Err(anyhow::anyhow!(
                    "--fault {s:?}: dns-wildcard is the whole lab's DNS, not one node's"
                )),
            },
            "no-ptr" => Ok(Fault::NoPtr(needs_node(node)?)),
            "mtu" => Ok(Fault::Mtu(needs_node(node)?)),
            "slow-disk" => Ok(Fault::SlowDisk(needs_node(node)?)),
            "no-default-route" => Ok(Fault::NoDefaultRoute(needs_node(node)?)),
            "live-again" => Ok(Fault::LiveAgain(needs_node(node)?)),
            "disk-first" => Ok(Fault::DiskFirst(needs_node(node)?)),
            _ => Err(anyhow::anyhow!("--fault {s:?}: no such fault (the faults: {NAMES})")),
        }
    }
}

/// As given on the command line: `NAME[:NODE]`.
impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::DnsWildcard => write!(f, "dns-wildcard"),
            Fault::NoPtr(n) => write!(f, "no-ptr:{n}"),
            Fault::Mtu(n) => write!(f, "mtu:{n}"),
            Fault::SlowDisk(n) => write!(f, "slow-disk:{n}"),
            Fault::NoDefaultRoute(n) => write!(f, "no-default-route:{n}"),
            Fault::LiveAgain(n) => write!(f, "live-again:{n}"),
            Fault::DiskFirst(n) => write!(f, "disk-first:{n}"),
        }
    }
}

impl Fault {
    /// The node the fault is about, if one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Fault::DnsWildcard => None,
            Fault::NoPtr(n) | Fault::Mtu(n) | Fault::SlowDisk(n) | Fault::NoDefaultRoute(n) | Fault::LiveAgain(n) | Fault::DiskFirst(n) => {
                Some(n)
            }
        }
    }
}

/// The MTU the VM of `node` gives its NIC, if a fault sets one (None: QEMU's 1500).
pub fn nic_mtu(faults: &[Fault], node: &str) -> Option<u32> {
    faults.iter().any(|f| *f == Fault::Mtu(node.to_string())).then_some(JUMBO)
}

/// The write operations a second the VM of `node` allows its disk, if a fault limits them.
pub fn disk_write_iops(faults: &[Fault], node: &str) -> Option<u32> {
    faults
        .iter()
        .any(|f| *f == Fault::SlowDisk(node.to_string()))
        .then_some(SLOW_WRITE_IOPS)
}

/// The generated DHCP config `dhcp` (dnsmasq: `dhcp-host=MAC,IP,NAME` per node) with `faults`
/// applied. The same dnsmasq serves DNS, and it answers for every name it gave a lease to, PTR
/// included: without this, `no-ptr` would take the record from the zone and dnsmasq would put it
/// back from the lease (the VM test once waited for HS108 in vain). So the node's lease carries
/// no name: its address resolves to nothing, as in a datacenter whose reverse zone lacks it.
pub fn apply_dhcp(dhcp: &str, faults: &[Fault]) -> anyhow::Result<String> {
    let mut out: Vec<String> = dhcp.lines().map(String::from).collect();
    for f in faults {
        let Fault::NoPtr(node) = f else { continue };
        let suffix = format!(",{node}");
        let i = out
            .iter()
            .position(|l| l.starts_with("dhcp-host=") && l.ends_with(&suffix))
            .with_context(|| format!("no-ptr:{node}: the lab's DHCP has no reservation naming {node}"))?;
        let keep = out[i].len() - suffix.len();
        out[i].truncate(keep);
    }
    Ok(out.iter().map(|l| format!("{l}\n")).collect())
}

/// The generated DNS config `dns` (dnsmasq: `local=/DOMAIN/`, `host-record=NAME,IP` for nodes)
/// with `faults` applied. Errors name what the config lacks for a fault.
pub fn apply_dns(dns: &str, faults: &[Fault]) -> anyhow::Result<String> {
    let domain = dns
        .lines()
        .find_map(|l| l.strip_prefix("local=/")?.strip_suffix('/'))
        .context("the lab's DNS config has no local=/DOMAIN/ line")?
        .to_string();
    let mut out: Vec<String> = dns.lines().map(String::from).collect();
    for f in faults {
        match f {
            Fault::DnsWildcard => {
                // A more specific address= and every host-record still win over it (dnsmasq
                // answers from its records first); only names nothing else answers hit it.
                let helper = helper_net(dns).context("the lab's DNS config has no host-record to take the network from")?;
                out.push(format!("address=/{domain}/{helper}.{WILDCARD_ANSWER_HOST}"));
            }
            Fault::Mtu(_) | Fault::SlowDisk(_) | Fault::NoDefaultRoute(_) | Fault::LiveAgain(_) | Fault::DiskFirst(_) => {}
            Fault::NoPtr(node) => {
                let prefix = format!("host-record={node}.{domain},");
                let i = out
                    .iter()
                    .position(|l| l.starts_with(&prefix))
                    .with_context(|| format!("no-ptr:{node}: the lab's DNS has no record for {node}.{domain}"))?;
                // address= gives the A record only; host-record gives both.
                let ip = out[i][prefix.len()..].split(',').next().unwrap_or_default().to_string();
                out[i] = format!("address=/{node}.{domain}/{ip}");
            }
        }
    }
    Ok(out.iter().map(|l| format!("{l}\n")).collect())
}

/// The nodes whose default route a fault takes.
fn without_route(faults: &[Fault]) -> impl Iterator<Item = &str> {
    faults.iter().filter_map(|f| match f {
        Fault::NoDefaultRoute(n) => Some(n.as_str()),
        _ => None,
    })
}

/// The iPXE script with `no-default-route` applied: the node's `ip=IP::GATEWAY:...` loses its
/// gateway field. `ip_of`: a node's address.
pub fn apply_ipxe(ipxe: &str, faults: &[Fault], ip_of: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<String> {
    let mut out = ipxe.to_string();
    for node in without_route(faults) {
        let ip = ip_of(node).with_context(|| format!("no-default-route:{node}: no such node"))?;
        let head = format!(" ip={ip}::");
        let at = out
            .find(&head)
            .with_context(|| format!("no-default-route:{node}: the iPXE script has no ip={ip}:: argument"))?;
        let gw_start = at + head.len();
        let gw_end = gw_start + out[gw_start..].find(':').context("an ip= argument without its fields")?;
        out.replace_range(gw_start..gw_end, "");
    }
    Ok(out)
}

/// A node's Ignition config (JSON) with `no-default-route` applied when it is that node's: each
/// NetworkManager keyfile's `addressN=IP/PREFIX,GATEWAY` loses its gateway and any `gateway=`
/// line goes. Unchanged (the same bytes) for every other node.
pub fn apply_ignition(node: &str, config: &[u8], faults: &[Fault]) -> anyhow::Result<Vec<u8>> {
    use hardshift_bundle::data_url::{decode, encode_plain};
    if !without_route(faults).any(|n| n == node) {
        return Ok(config.to_vec());
    }
    let mut v: serde_json::Value = serde_json::from_slice(config).with_context(|| format!("{node}.ign"))?;
    let mut changed = 0;
    for f in v["storage"]["files"].as_array_mut().into_iter().flatten() {
        if !f["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/etc/NetworkManager/system-connections/"))
        {
            continue;
        }
        let source = f["contents"]["source"].as_str().unwrap_or_default();
        let bytes = decode(source, f["contents"]["compression"].as_str())
            .with_context(|| format!("{node}.ign: a keyfile hardshift cannot read"))?;
        let text = String::from_utf8(bytes).with_context(|| format!("{node}.ign"))?;
        let keyfile: String = text
            .lines()
            .filter(|l| !l.starts_with("gateway="))
            .map(|l| match (l.split_once('='), l.starts_with("address")) {
                (Some((k, v)), true) => format!("{k}={}\n", v.split(',').next().unwrap_or(v)),
                _ => format!("{l}\n"),
            })
            .collect();
        if keyfile != text {
            changed += 1;
        }
        f["contents"] = serde_json::json!({ "source": encode_plain(keyfile.as_bytes()) });
    }
    if changed == 0 {
        return Err(anyhow::anyhow!(
            "no-default-route:{node}: its config has no NetworkManager keyfile with a gateway"
        ));
    }
    Ok(serde_json::to_vec(&v)?)
}

/// The first three octets of the first node's IPv4 address.
fn helper_net(dns: &str) -> Option<String> {
    dns.lines().find_map(|l| {
        let ip = l.strip_prefix("host-record=")?.split(',').nth(1)?;
        let ip: std::net::Ipv4Addr = ip.parse().ok()?;
        let o = ip.octets();
        Some(format!("{}.{}.{}", o[0], o[1], o[2]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: &str = "local=/ocp4.example.com/\nhost-record=api.ocp4.example.com,192.168.126.10\nhost-record=master-2.ocp4.example.com,192.168.126.103\naddress=/apps.ocp4.example.com/192.168.126.11\n";

    #[test]
    fn faults_parse_or_say_what_is_wrong() {
        assert_eq!("dns-wildcard".parse::<Fault>().unwrap(), (Fault::DnsWildcard));
        assert_eq!("no-ptr:master-2".parse::<Fault>().unwrap(), (Fault::NoPtr("master-2".into())));
        assert!("no-ptr".parse::<Fault>().unwrap_err().to_string().contains("needs a node"));
        assert!("dns-wildcard:master-0"
            .parse::<Fault>()
            .unwrap_err()
            .to_string()
            .contains("whole lab"));
        assert_eq!("mtu:master-0".parse::<Fault>().unwrap(), (Fault::Mtu("master-0".into())));
        assert!("mtu".parse::<Fault>().unwrap_err().to_string().contains("needs a node"));
        assert!("jumbo:master-0".parse::<Fault>().unwrap_err().to_string().contains(NAMES));
    }

    #[test]
    fn the_dns_config_with_each_fault() {
        let w = apply_dns(DNS, &[Fault::DnsWildcard]).unwrap();
        assert!(w.ends_with("address=/ocp4.example.com/192.168.126.250\n"), "{w}");
        let p = apply_dns(DNS, &[Fault::NoPtr("master-2".into())]).unwrap();
        assert!(p.contains("address=/master-2.ocp4.example.com/192.168.126.103\n"), "{p}");
        assert!(!p.contains("host-record=master-2"), "{p}");
        assert!(p.contains("host-record=api.ocp4.example.com,192.168.126.10\n"), "{p}");
        let e = apply_dns(DNS, &[Fault::NoPtr("worker-9".into())]).unwrap_err();
        assert!(e.to_string().contains("no record for worker-9.ocp4.example.com"), "{e}");
        assert_eq!(apply_dns(DNS, &[]).unwrap(), DNS);
        assert_eq!(apply_dns(DNS, &[Fault::Mtu("master-2".into())]).unwrap(), DNS);
    }

    #[test]
    fn no_default_route_takes_the_gateway_from_the_kernel_line_and_the_keyfile() {
        let f = [Fault::NoDefaultRoute("m".into())];
        assert_eq!("no-default-route:m".parse::<Fault>().unwrap(), (f[0].clone()));
        assert_eq!(f[0].to_string(), "no-default-route:m");
        let ipxe = ":mac-x\nkernel k ip=192.168.126.101::192.168.126.1:255.255.255.0:m:enp1s0:none nameserver=192.168.126.1\n:mac-y\nkernel k ip=192.168.126.102::192.168.126.1:255.255.255.0:n:enp1s0:none\n";
        let ip_of = |n: &str| (n == "m").then(|| "192.168.126.101".to_string());
        let out = apply_ipxe(ipxe, &f, &ip_of).unwrap();
        assert!(out.contains(" ip=192.168.126.101:::255.255.255.0:m:enp1s0:none "), "{out}");
        assert!(
            out.contains(" ip=192.168.126.102::192.168.126.1:"),
            "another node keeps its route: {out}"
        );
        assert_eq!(apply_ipxe(ipxe, &[], &ip_of).unwrap(), ipxe);
        let key = "[ipv4]\nmethod=manual\naddress1=192.168.126.101/24,192.168.126.1\ndns=192.168.126.1;\n";
        let cfg = serde_json::json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [
            {"path": "/etc/NetworkManager/system-connections/enp1s0.nmconnection", "mode": 384,
             "contents": {"source": hardshift_bundle::data_url::encode_plain(key.as_bytes())}},
            {"path": "/etc/hostname", "contents": {"source": "data:,m"}}]}});
        let bytes = serde_json::to_vec(&cfg).unwrap();
        assert_eq!(
            apply_ignition("n", &bytes, &f).unwrap(),
            bytes,
            "another node's config is as written"
        );
        let out: serde_json::Value = serde_json::from_slice(&apply_ignition("m", &bytes, &f).unwrap()).unwrap();
        let c = &out["storage"]["files"][0]["contents"];
        let text = String::from_utf8(hardshift_bundle::data_url::decode(c["source"].as_str().unwrap(), None).unwrap()).unwrap();
        assert_eq!(text, "[ipv4]\nmethod=manual\naddress1=192.168.126.101/24\ndns=192.168.126.1;\n");
        assert_eq!(out["storage"]["files"][0]["mode"], 384);
    }

    #[test]
    fn the_mtu_fault_is_one_nodes_nic() {
        let faults = [Fault::DnsWildcard, Fault::Mtu("master-0".into())];
        assert_eq!(nic_mtu(&faults, "master-0"), Some(JUMBO));
        assert_eq!(nic_mtu(&faults, "master-1"), None);
        assert_eq!(nic_mtu(&[], "master-0"), None);
    }

    #[test]
    fn no_ptr_takes_the_name_from_the_nodes_lease_too() {
        let dhcp = "dhcp-range=192.168.126.0,static\ndhcp-host=52:54:00:00:00:65,192.168.126.101,master-0\ndhcp-host=52:54:00:00:00:66,192.168.126.102,master-1\n";
        let out = apply_dhcp(dhcp, &["no-ptr:master-0".parse().unwrap(), "mtu:master-1".parse().unwrap()]).unwrap();
        assert!(out.contains("dhcp-host=52:54:00:00:00:65,192.168.126.101\n"), "{out}");
        assert!(out.contains("dhcp-host=52:54:00:00:00:66,192.168.126.102,master-1\n"), "{out}");
        assert_eq!(apply_dhcp(dhcp, &[]).unwrap(), dhcp);
        let e = apply_dhcp(dhcp, &["no-ptr:master-9".parse().unwrap()]).unwrap_err();
        assert!(e.to_string().contains("master-9"), "{e}");
    }

    #[test]
    fn the_slow_disk_fault_is_one_nodes_disk() {
        let faults = vec!["slow-disk:master-2".parse().unwrap(), "mtu:master-0".parse().unwrap()];
        assert_eq!(disk_write_iops(&faults, "master-2"), Some(SLOW_WRITE_IOPS));
        assert_eq!(disk_write_iops(&faults, "master-0"), None);
        assert!("slow-disk".parse::<Fault>().unwrap_err().to_string().contains("needs a node"));
    }
}
