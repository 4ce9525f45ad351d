//! dnsmasq's own log lines (`--log-dhcp --log-facility=-`, one line each on stderr) read into
//! boot events: the four DHCP messages and a NAK by MAC and address, a request the reservations
//! have no address for, and each TFTP file sent or missing. The formats are dnsmasq 2.90's, as
//! recorded from a real run in the tests below.

use hardshift_collector::boot::Step;

/// What one line says, before the inventory names the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub step: Step,
    pub mac: String,
    pub ip: String,
    pub detail: String,
}

/// The step a log line records, if it records one.
pub fn read_line(line: &str) -> Option<Seen> {
    let (tag, rest) = line.split_once(": ")?;
    if tag.starts_with("dnsmasq-dhcp") {
        dhcp(rest)
    } else if tag.starts_with("dnsmasq-tftp") {
        tftp(rest)
    } else {
        None
    }
}

fn is_mac(s: &str) -> bool {
    s.len() == 17 && s.split(':').count() == 6 && s.split(':').all(|o| o.len() == 2 && o.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `3090241143 DHCPACK(vA) 192.168.200.101 52:54:00:aa:bb:01 master-0`: the transaction id,
/// the message with its interface, then the address (not on a DISCOVER), the MAC, and the name
/// or why not ("no address available").
fn dhcp(rest: &str) -> Option<Seen> {
    let mut words = rest.split_whitespace();
    let first = words.next()?;
    // With --log-dhcp each line starts with the transaction id.
    let msg = if first.bytes().all(|b| b.is_ascii_digit()) {
        words.next()?
    } else {
        first
    };
    let kind = msg.split('(').next()?;
    let step = match kind {
        "DHCPDISCOVER" => Step::DhcpDiscover,
        "DHCPOFFER" => Step::DhcpOffer,
        "DHCPREQUEST" => Step::DhcpRequest,
        "DHCPACK" => Step::DhcpAck,
        "DHCPNAK" => Step::DhcpNak,
        _ => return None,
    };
    let rest: Vec<&str> = words.collect();
    let at = rest.iter().position(|w| is_mac(w))?;
    let ip = if at > 0 && rest[at - 1].parse::<std::net::IpAddr>().is_ok() {
        rest[at - 1].to_string()
    } else {
        String::new()
    };
    let detail = rest[at + 1..].join(" ");
    let step = if step == Step::DhcpDiscover && detail.contains("no address available") {
        Step::DhcpNoAddress
    } else {
        step
    };
    Some(Seen {
        step,
        mac: rest[at].to_ascii_lowercase(),
        ip,
        detail,
    })
}

/// `sent /tftp/undionly.kpxe to 192.168.200.50` and `file /tftp/x not found for 192.168.200.50`.
fn tftp(rest: &str) -> Option<Seen> {
    if let Some(r) = rest.strip_prefix("sent ") {
        let (file, ip) = r.rsplit_once(" to ")?;
        return Some(Seen {
            step: Step::TftpSent,
            mac: String::new(),
            ip: ip.trim().to_string(),
            detail: file.to_string(),
        });
    }
    if let Some(r) = rest.strip_prefix("file ") {
        let (file, ip) = r.rsplit_once(" not found for ")?;
        return Some(Seen {
            step: Step::TftpMissing,
            mac: String::new(),
            ip: ip.trim().to_string(),
            detail: file.to_string(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines recorded from dnsmasq 2.90 (Debian 12) serving busybox udhcpc and tftp in two
    /// network namespaces.
    const RECORDED: &str = "dnsmasq[5912]: started, version 2.90 cachesize 150
dnsmasq-dhcp[5912]: DHCP, static leases only on 192.168.200.0, lease time 1h
dnsmasq-tftp[5912]: TFTP root is /tmp/dq/tftp  
dnsmasq-dhcp[5912]: 3090241143 available DHCP subnet: 192.168.200.0/255.255.255.0
dnsmasq-dhcp[5912]: 3090241143 vendor class: udhcp 1.35.0
dnsmasq-dhcp[5912]: 3090241143 DHCPDISCOVER(vA) 52:54:00:aa:bb:01 
dnsmasq-dhcp[5912]: 3090241143 tags: known, vA
dnsmasq-dhcp[5912]: 3090241143 DHCPOFFER(vA) 192.168.200.101 52:54:00:aa:bb:01 
dnsmasq-dhcp[5912]: 3090241143 sent size:  4 option: 54 server-identifier  192.168.200.1
dnsmasq-dhcp[5912]: 3090241143 DHCPREQUEST(vA) 192.168.200.101 52:54:00:aa:bb:01 
dnsmasq-dhcp[5912]: 3090241143 DHCPACK(vA) 192.168.200.101 52:54:00:aa:bb:01 master-0
dnsmasq-dhcp[5912]: 3090241143 sent size:  8 option: 12 hostname  master-0
dnsmasq-dhcp[7284]: 3738154553 DHCPDISCOVER(vA) 52:54:00:AA:BB:99 no address available
dnsmasq-tftp[7284]: file /tmp/dq/tftp/nothere.kpxe not found for 192.168.200.50
dnsmasq-tftp[7284]: sent /tmp/dq/tftp/undionly.kpxe to 192.168.200.50
";

    #[test]
    fn the_steps_of_a_recorded_boot() {
        let seen: Vec<Seen> = RECORDED.lines().filter_map(read_line).collect();
        let steps: Vec<Step> = seen.iter().map(|s| s.step).collect();
        assert_eq!(
            steps,
            [
                Step::DhcpDiscover,
                Step::DhcpOffer,
                Step::DhcpRequest,
                Step::DhcpAck,
                Step::DhcpNoAddress,
                Step::TftpMissing,
                Step::TftpSent
            ]
        );
        assert_eq!(
            (seen[3].ip.as_str(), seen[3].mac.as_str(), seen[3].detail.as_str()),
            ("192.168.126.101".replace("126", "200").as_str(), "52:54:00:aa:bb:01", "master-0")
        );
        assert_eq!(seen[0].ip, "");
        assert_eq!(seen[4].mac, "52:54:00:aa:bb:99", "lowercased");
        assert_eq!(
            (seen[6].ip.as_str(), seen[6].detail.as_str()),
            ("192.168.200.50", "/tmp/dq/tftp/undionly.kpxe")
        );
    }

    #[test]
    fn other_lines_are_no_step() {
        for l in [
            "",
            "dnsmasq: x",
            "dnsmasq-dhcp[1]: DHCPINFORM(vA) 10.0.0.1 52:54:00:aa:bb:01",
            "dnsmasq-dhcp[1]: 1 DHCPACK(vA) no mac here",
            "garbage",
        ] {
            assert_eq!(read_line(l), None, "{l:?}");
        }
    }
}
