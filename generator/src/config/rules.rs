//! Small checks shared by the validators. Each returns `Err(reason)` in words a user can act on.

use base64::Engine;
use ipnet::IpNet;

/// What a value breaks of a rule, in words a user can act on; the validator that called the
/// rule adds the file, line, column and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Broken(pub String);

/// The message, for a validator's finding.
impl From<Broken> for String {
    fn from(b: Broken) -> String {
        b.0
    }
}

/// RFC 1123 label: lowercase alphanumerics and '-', starting and ending alphanumeric, ≤63.
pub fn dns1123_label(s: &str) -> Result<(), Broken> {
    if s.is_empty() {
        return Err(Broken("must not be empty".to_string()));
    }
    if s.len() > 63 {
        return Err(Broken(format!("must be at most 63 characters, is {}", s.len())));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if let Some(bad) = s.chars().find(|c| !ok_char(*c)) {
        return Err(Broken(format!(
            "contains {bad:?}: only lowercase letters, digits and '-' are allowed"
        )));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err(Broken("must start and end with a letter or digit".to_string()));
    }
    Ok(())
}

/// RFC 1123 subdomain: dot-separated labels, ≤253.
pub fn dns1123_subdomain(s: &str) -> Result<(), Broken> {
    if s.len() > 253 {
        return Err(Broken(format!("must be at most 253 characters, is {}", s.len())));
    }
    for label in s.split('.') {
        dns1123_label(label).map_err(|e| Broken(format!("label {label:?} {e}")))?;
    }
    Ok(())
}

/// A disk `coreos-installer install` writes: one absolute device path under /dev, which a script
/// passes as one argument (the installer pastes it into a shell line unchecked: a space there adds
/// arguments).
pub fn device_path(s: &str) -> Result<(), Broken> {
    if s.is_empty() {
        return Err(Broken("must not be empty".to_string()));
    }
    if !s.starts_with("/dev/") || s.len() == "/dev/".len() {
        return Err(Broken(format!(
            "{s:?} is not a device path (expected e.g. /dev/disk/by-id/wwn-0x5000c500a0b1c2d3 or /dev/sda)"
        )));
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || "/._:+@=-".contains(c);
    if let Some(bad) = s.chars().find(|c| !ok(*c)) {
        return Err(Broken(format!(
            "{s:?} contains {bad:?}: a device path is letters, digits and / . _ : + @ = - only"
        )));
    }
    if s.split('/').any(|c| c == "..") || s.ends_with('/') {
        return Err(Broken(format!("{s:?} is not a plain device path (no `..`, no trailing /)")));
    }
    Ok(())
}

/// A base URL the nodes fetch from (`lab.httpBaseUrl`): it goes into kernel command lines,
/// iPXE and PXELINUX scripts, dnsmasq's and dhcpd's configs and a shell script, so it is one
/// plain http(s) URL: no spaces, quotes or shell characters, no query, fragment or user.
pub fn http_base_url(s: &str) -> Result<(), Broken> {
    let Some(rest) = s.strip_prefix("http://").or_else(|| s.strip_prefix("https://")) else {
        return Err(Broken(format!(
            "{s:?} is not an http:// or https:// URL (expected e.g. http://192.168.126.1:8080)"
        )));
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || "-._~:/[]%".contains(c);
    if let Some(bad) = s.chars().find(|c| !ok(*c)) {
        return Err(Broken(format!(
            "{s:?} contains {bad:?}: the nodes' kernel command lines and the lab's scripts take a plain URL (letters, digits and - . _ ~ : / [ ] % only)"
        )));
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(Broken(format!("{s:?} names no host")));
    }
    if s.ends_with('/') {
        return Err(Broken(format!("{s:?} ends with /: the lab adds /ignition/..., /pxe/... to it")));
    }
    Ok(())
}

pub fn cidr(s: &str) -> Result<IpNet, Broken> {
    let net: IpNet = s
        .parse()
        .map_err(|_| Broken(format!("{s:?} is not a CIDR (expected e.g. 192.168.126.0/24)")))?;
    if net.trunc() != net {
        return Err(Broken(format!("{s:?} has host bits set; the network is {}", net.trunc())));
    }
    Ok(net)
}

pub fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// `aa:bb:cc:dd:ee:ff`, unicast (the group bit of the first octet clear). Returns it lowercased.
pub fn unicast_mac(s: &str) -> Result<String, Broken> {
    let parts: Vec<&str> = s.split(':').collect();
    let valid = parts.len() == 6 && parts.iter().all(|p| p.len() == 2 && u8::from_str_radix(p, 16).is_ok());
    if !valid {
        return Err(Broken(format!(
            "{s:?} is not a MAC address (expected six hex pairs like 52:54:00:aa:bb:01)"
        )));
    }
    let first = u8::from_str_radix(parts[0], 16).unwrap_or(0);
    if first & 1 == 1 {
        return Err(Broken(format!("{s:?} is a multicast address; a host needs a unicast MAC")));
    }
    Ok(s.to_ascii_lowercase())
}

const SSH_KEY_TYPES: &[&str] = &[
    "ssh-rsa",
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// One authorized_keys line: `type base64 [comment]`, where the blob names the same type.
pub fn ssh_public_key(line: &str) -> Result<(), Broken> {
    let mut fields = line.split_whitespace();
    let (Some(kind), Some(blob)) = (fields.next(), fields.next()) else {
        return Err(Broken(
            "expected `<type> <base64 key> [comment]`, e.g. the content of ~/.ssh/id_ed25519.pub".to_string(),
        ));
    };
    if !SSH_KEY_TYPES.contains(&kind) {
        return Err(Broken(format!(
            "unknown key type {kind:?} (expected one of {})",
            SSH_KEY_TYPES.join(", ")
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|_| Broken("the key data is not valid base64".to_string()))?;
    let inner = bytes
        .get(..4)
        .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .and_then(|n| bytes.get(4..4 + n));
    match inner {
        Some(name) if name == kind.as_bytes() => Ok(()),
        _ => Err(Broken(format!(
            "the key data does not hold a {kind} key (truncated or pasted wrongly?)"
        ))),
    }
}

/// The pull secret: JSON with an `auths` object.
pub fn pull_secret(s: &str) -> Result<(), Broken> {
    let v: serde_json::Value = serde_json::from_str(s).map_err(|e| Broken(format!("is not valid JSON: {e}")))?;
    match v.get("auths") {
        Some(serde_json::Value::Object(_)) => Ok(()),
        Some(_) => Err(Broken("`auths` must be a JSON object of registry → credentials".to_string())),
        None => Err(Broken("auths required".to_string())),
    }
}

/// PEM certificates; returns how many parsed.
pub fn pem_certificates(s: &str) -> Result<usize, Broken> {
    let mut n = 0;
    for pem in x509_parser::pem::Pem::iter_from_buffer(s.as_bytes()) {
        let pem = pem.map_err(|e| Broken(format!("is not valid PEM: {e}")))?;
        if pem.label != "CERTIFICATE" {
            return Err(Broken(format!(
                "holds a {:?} block; only CERTIFICATE blocks belong here",
                pem.label
            )));
        }
        pem.parse_x509()
            .map_err(|e| Broken(format!("certificate {} does not parse: {e}", n + 1)))?;
        n += 1;
    }
    if n == 0 {
        return Err(Broken("holds no PEM certificate".to_string()));
    }
    Ok(n)
}

/// `http://host[:port]` or `https://...`, optionally with user info.
pub fn proxy_url(s: &str) -> Result<(), Broken> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or_else(|| Broken(format!("{s:?} must start with http:// or https://")))?;
    let host = rest.split('/').next().unwrap_or("").rsplit('@').next().unwrap_or("");
    if host.is_empty() {
        return Err(Broken(format!("{s:?} has no host")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert!(dns1123_label("ocp4").is_ok());
        assert!(dns1123_label("Ocp4").is_err());
        assert!(dns1123_label("-a").is_err());
        assert!(dns1123_subdomain("example.com").is_ok());
        assert!(dns1123_subdomain("example..com").is_err());
    }

    #[test]
    fn macs() {
        assert_eq!(unicast_mac("52:54:00:AA:bb:01").unwrap(), "52:54:00:aa:bb:01");
        assert!(unicast_mac("01:00:5e:00:00:01").is_err());
        assert!(unicast_mac("52:54:00:aa:bb").is_err());
    }

    #[test]
    fn ssh_keys() {
        // ssh-ed25519 blob: string "ssh-ed25519" + 32-byte key.
        let mut blob = vec![0, 0, 0, 11];
        blob.extend_from_slice(b"ssh-ed25519");
        blob.extend_from_slice(&[0, 0, 0, 32]);
        blob.extend_from_slice(&[7u8; 32]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&blob);
        assert!(ssh_public_key(&format!("ssh-ed25519 {b64} me@host")).is_ok());
        assert!(ssh_public_key(&format!("ssh-rsa {b64}")).is_err());
        assert!(ssh_public_key("ssh-ed25519").is_err());
    }

    #[test]
    fn cidrs() {
        assert!(cidr("10.0.0.0/8").is_ok());
        assert!(cidr("10.0.0.1/8").is_err());
        assert!(overlaps(&cidr("10.0.0.0/8").unwrap(), &cidr("10.128.0.0/14").unwrap()));
        assert!(!overlaps(&cidr("10.0.0.0/16").unwrap(), &cidr("10.1.0.0/16").unwrap()));
    }

    #[test]
    fn device_paths() {
        for ok in [
            "/dev/sda",
            "/dev/vda",
            "/dev/nvme0n1",
            "/dev/disk/by-id/wwn-0x64cd98f04fde100024684cf3034da5c2",
            "/dev/disk/by-path/pci-0000:00:1f.2-ata-1",
        ] {
            assert!(device_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "sda",
            "/dev/",
            "/dev/sda --append-karg foo",
            "/dev/sda;reboot",
            "/dev/../etc/passwd",
            "/dev/disk/by-id/",
            "/dev/sda$(id)",
        ] {
            assert!(device_path(bad).is_err(), "{bad:?}");
        }
    }
}
