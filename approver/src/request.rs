//! A PKCS#10 request read as Kubernetes reads it, or refused. The kube-controller-manager's signer
//! issues what Go's crypto/x509 reads from a request: the subject's LAST CommonName (any string
//! type encoding/asn1 decodes: PrintableString, UTF8String, T61String, BMPString, IA5String,
//! NumericString), every Organization, and the SANs of the request's extensions. A reader that
//! skips what it cannot decode would judge one name while the cluster issues another (a second
//! CN as a BMPString logs in as whoever it names). So a node's request is read strictly: one CN
//! and one O, each alone in its RDN, each a PrintableString or UTF8String, nothing else in the
//! subject; one extension request holding at most one subjectAltName. Anything else is refused
//! with what it was, never skipped.

use std::net::IpAddr;
use x509_parser::asn1_rs::{Any, FromDer, Oid, Tag};
use x509_parser::prelude::*;

/// What a node's request asks for, read unambiguously.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub cn: String,
    pub org: String,
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
    /// SANs of other kinds (email, URI, ...): never for a node.
    pub other_sans: usize,
}

const OID_CN: &str = "2.5.4.3";
const OID_O: &str = "2.5.4.10";
const OID_SAN: &str = "2.5.29.17";
const OID_EXTENSION_REQUEST: &str = "1.2.840.113549.1.9.14";

/// Why a request does not read as Go's crypto/x509 and encoding/asn1 read it (the API server
/// and the machine-approver would not see what we would): such a request is refused, never
/// approved on a reading of our own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// An OID's dotted form, once its DER is known to be what Go's encoding/asn1 accepts: each arc
/// minimal base-128 (no leading 0x80), none cut short, none above 2^31-1. x509-parser keeps a
/// malformed OID and prints something for it (a cut-short `55 04 8a` prints as 2.5.4.10, O),
/// while its own attribute lookups compare bytes: comparing the printed forms of a malformed OID
/// would read a name no other reader sees. Well-formed, the dotted form names the bytes uniquely.
fn dotted(oid: &Oid) -> Result<String, Unreadable> {
    let der = oid.as_bytes();
    let mut arc: u64 = 0;
    let mut at_start = true;
    for &b in der {
        if at_start && b == 0x80 {
            return Err(Unreadable(format!("an OID with a non-minimal arc ({})", hex(der))));
        }
        arc = (arc << 7) | u64::from(b & 0x7f);
        if arc > i32::MAX as u64 {
            return Err(Unreadable(format!("an OID with an arc above 2^31-1 ({})", hex(der))));
        }
        at_start = b & 0x80 == 0;
        if at_start {
            arc = 0;
        }
    }
    if der.is_empty() || !at_start {
        return Err(Unreadable(format!("a malformed OID ({})", hex(der))));
    }
    Ok(oid.to_id_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

/// A subject attribute's usual name, for the message that refuses it.
fn attribute_name(oid: &str) -> String {
    let known = [
        (OID_CN, "CN"),
        (OID_O, "O"),
        ("2.5.4.11", "OU"),
        ("2.5.4.5", "serialNumber"),
        ("2.5.4.6", "C"),
        ("2.5.4.7", "L"),
        ("2.5.4.8", "ST"),
        ("2.5.4.9", "street"),
        ("2.5.4.17", "postalCode"),
        ("0.9.2342.19200300.100.1.25", "DC"),
        ("0.9.2342.19200300.100.1.1", "UID"),
        ("1.2.840.113549.1.9.1", "emailAddress"),
    ];
    known
        .iter()
        .find(|(o, _)| *o == oid)
        .map_or_else(|| format!("attribute {oid}"), |(_, n)| n.to_string())
}

/// The name of a string type, and what it says decoded as Go decodes it (for the message).
fn other_string(tag: Tag, data: &[u8]) -> (&'static str, String) {
    let lossy = |s: String| s.chars().map(|c| if c.is_control() { '?' } else { c }).collect::<String>();
    match tag {
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            ("BMPString", lossy(String::from_utf16_lossy(&units)))
        }
        Tag::UniversalString => (
            "UniversalString",
            lossy(
                data.chunks(4)
                    .map(|c| {
                        let mut b = [0u8; 4];
                        b[..c.len()].copy_from_slice(c);
                        char::from_u32(u32::from_be_bytes(b)).unwrap_or('?')
                    })
                    .collect(),
            ),
        ),
        // Go reads a T61String's bytes as Latin-1.
        Tag::TeletexString => ("T61String", lossy(data.iter().map(|&b| char::from(b)).collect())),
        Tag::Ia5String => ("IA5String", lossy(String::from_utf8_lossy(data).into_owned())),
        Tag::NumericString => ("NumericString", lossy(String::from_utf8_lossy(data).into_owned())),
        Tag::VisibleString => ("VisibleString", lossy(String::from_utf8_lossy(data).into_owned())),
        _ => ("a value of another ASN.1 type", String::new()),
    }
}

/// The subject's one CN and one O, or why the subject is not read.
fn subject(name: &X509Name) -> Result<(String, String), Unreadable> {
    let (mut cns, mut orgs) = (Vec::new(), Vec::new());
    for rdn in name.iter() {
        let attrs: Vec<&AttributeTypeAndValue> = rdn.iter().collect();
        if attrs.len() != 1 {
            let names: Vec<String> = attrs
                .iter()
                .map(|a| dotted(a.attr_type()).map_or_else(|e| e.0, |o| attribute_name(&o)))
                .collect();
            return Err(Unreadable(format!(
                "the subject has a multi-valued RDN ({} in one set): each name must stand alone",
                names.join(" + ")
            )));
        }
        let attr = attrs[0];
        let oid = dotted(attr.attr_type()).map_err(|e| Unreadable(format!("the subject holds {e}")))?;
        let what = attribute_name(&oid);
        if oid != OID_CN && oid != OID_O {
            return Err(Unreadable(format!(
                "the subject holds {what}: a node's request holds only CN and O, and the signer would copy the rest into its certificate"
            )));
        }
        let value: &Any = attr.attr_value();
        let text = match value.tag() {
            Tag::PrintableString | Tag::Utf8String => std::str::from_utf8(value.data)
                .map_err(|_| Unreadable(format!("the subject's {what} is not valid UTF-8")))?
                .to_string(),
            other => {
                let (kind, says) = other_string(other, value.data);
                return Err(Unreadable(format!(
                    "the subject's {what} is a {kind} ({says:?}): Kubernetes reads it as a name too, so hardshift accepts only PrintableString and UTF8String names"
                )));
            }
        };
        if oid == OID_CN {
            cns.push(text);
        } else {
            orgs.push(text);
        }
    }
    match (cns.as_slice(), orgs.as_slice()) {
        ([cn], [o]) => Ok((cn.clone(), o.clone())),
        _ => Err(Unreadable(format!(
            "the subject must hold exactly one CN and one O, it holds CN {cns:?} and O {orgs:?} (Kubernetes takes the last CN and every O)"
        ))),
    }
}

/// The SANs of the request's one extension request, or why they are not read. Go reads every
/// extension request (and refuses a duplicate extension); x509-parser's `requested_extensions`
/// only the first: so every attribute is looked at here.
fn sans(req: &X509CertificationRequest, r: &mut Request) -> Result<(), Unreadable> {
    let mut requests = 0;
    let mut seen: Vec<String> = Vec::new();
    for attr in req.certification_request_info.iter_attributes() {
        if dotted(&attr.oid).map_err(|e| Unreadable(format!("the request has an attribute with {e}")))? != OID_EXTENSION_REQUEST {
            continue;
        }
        requests += 1;
        if requests > 1 {
            return Err(Unreadable("the request holds two extension requests".to_string()));
        }
        // The attribute's value is a SET; Go reads its first element only.
        let values = x509_parser::asn1_rs::Set::from_der(attr.value)
            .map_err(|e| Unreadable(format!("the extension request is not a DER SET: {e}")))?
            .1;
        let mut content = values.content.as_ref();
        let mut count = 0;
        while !content.is_empty() {
            let (rest, _) = Any::from_der(content).map_err(|e| Unreadable(format!("the extension request's values: {e}")))?;
            content = rest;
            count += 1;
        }
        if count != 1 {
            return Err(Unreadable(format!("the extension request holds {count} values, not one")));
        }
        let ParsedCriAttribute::ExtensionRequest(exts) = attr.parsed_attribute() else {
            return Err(Unreadable("the extension request cannot be read".to_string()));
        };
        for ext in &exts.extensions {
            let oid = dotted(&ext.oid).map_err(|e| Unreadable(format!("the extension request holds {e}")))?;
            if seen.contains(&oid) {
                return Err(Unreadable(format!("the request asks for extension {oid} twice")));
            }
            seen.push(oid.clone());
            if oid != OID_SAN {
                continue;
            }
            let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() else {
                return Err(Unreadable("the request's subjectAltName cannot be read".to_string()));
            };
            for name in &san.general_names {
                match name {
                    GeneralName::DNSName(d) => r.dns.push(d.to_string()),
                    GeneralName::IPAddress(b) => match <[u8; 4]>::try_from(*b) {
                        Ok(v4) => r.ips.push(IpAddr::from(v4)),
                        Err(_) => match <[u8; 16]>::try_from(*b) {
                            Ok(v6) => r.ips.push(IpAddr::from(v6)),
                            Err(_) => return Err(Unreadable(format!("an IP SAN of {} bytes", b.len()))),
                        },
                    },
                    _ => r.other_sans += 1,
                }
            }
        }
    }
    Ok(())
}

/// A DER subject (an X.509 Name) read by the same rules: for the fuzz target, which makes
/// subjects no signature would cover.
pub fn read_subject(der: &[u8]) -> Result<(String, String), Unreadable> {
    let (_, name) = X509Name::from_der(der).map_err(|e| Unreadable(format!("not a DER Name: {e}")))?;
    subject(&name)
}

/// Read a PEM request: its signature verified, its subject and SANs read unambiguously.
pub fn parse(pem: &[u8]) -> Result<Request, Unreadable> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| Unreadable(format!("not a PEM request: {e}")))?;
    if p.label != "CERTIFICATE REQUEST" && p.label != "NEW CERTIFICATE REQUEST" {
        return Err(Unreadable(format!("PEM block is {:?}, not a CERTIFICATE REQUEST", p.label)));
    }
    let (rest, req) = X509CertificationRequest::from_der(&p.contents).map_err(|e| Unreadable(format!("not a PKCS#10 request: {e}")))?;
    if !rest.is_empty() {
        return Err(Unreadable(format!("{} bytes after the PKCS#10 request", rest.len())));
    }
    req.verify_signature()
        .map_err(|e| Unreadable(format!("the request's signature does not verify: {e}")))?;
    let (cn, org) = subject(&req.certification_request_info.subject)?;
    let mut r = Request {
        cn,
        org,
        ..Default::default()
    };
    sans(&req, &mut r)?;
    Ok(r)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair, SanType};

    /// A request with the subject's attributes in this order, each of the given string type.
    pub(crate) fn with_subject(attrs: Vec<(DnType, DnValue)>, sans: Vec<SanType>) -> Vec<u8> {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        for (t, v) in attrs {
            dn.push(t, v);
        }
        p.distinguished_name = dn;
        p.subject_alt_names = sans;
        let key = KeyPair::generate().unwrap();
        p.serialize_request(&key).unwrap().pem().unwrap().into_bytes()
    }

    fn utf8(s: &str) -> DnValue {
        DnValue::Utf8String(s.into())
    }

    fn refused(pem: &[u8], why: &str) {
        match parse(pem) {
            Err(e) => assert!(e.0.contains(why), "{e:?} should say {why:?}"),
            Ok(r) => panic!("{r:?} should be refused for {why:?}"),
        }
    }

    #[test]
    fn one_cn_and_one_o_of_the_plain_string_types_are_read() {
        let pem = with_subject(
            vec![
                (
                    DnType::OrganizationName,
                    DnValue::PrintableString("system:nodes".try_into().unwrap()),
                ),
                (DnType::CommonName, utf8("system:node:worker-1")),
            ],
            vec![],
        );
        let r = parse(&pem).unwrap();
        assert_eq!((r.cn.as_str(), r.org.as_str()), ("system:node:worker-1", "system:nodes"));
    }

    /// The probe's request: the cluster would issue it to the second CN, master-0.
    #[test]
    fn a_second_cn_as_a_bmpstring_is_refused_not_skipped() {
        let pem = with_subject(
            vec![
                (DnType::OrganizationName, utf8("system:nodes")),
                (DnType::CommonName, utf8("system:node:worker-1")),
                (
                    DnType::CustomDnType(vec![2, 5, 4, 3]),
                    DnValue::BmpString("system:node:master-0".try_into().unwrap()),
                ),
            ],
            vec![],
        );
        refused(&pem, "CN is a BMPString (\"system:node:master-0\")");
    }

    #[test]
    fn every_other_string_type_is_refused_naming_it() {
        let t61 = with_subject(
            vec![
                (DnType::OrganizationName, utf8("system:nodes")),
                (
                    DnType::CommonName,
                    DnValue::TeletexString("system:node:master-0".try_into().unwrap()),
                ),
            ],
            vec![],
        );
        refused(&t61, "CN is a T61String (\"system:node:master-0\")");
        let universal = with_subject(
            vec![
                (
                    DnType::OrganizationName,
                    DnValue::UniversalString("system:masters".try_into().unwrap()),
                ),
                (DnType::CommonName, utf8("system:node:master-0")),
            ],
            vec![],
        );
        refused(&universal, "O is a UniversalString (\"system:masters\")");
        let ia5 = with_subject(
            vec![
                (DnType::OrganizationName, utf8("system:nodes")),
                (DnType::CommonName, DnValue::Ia5String("system:node:master-0".try_into().unwrap())),
            ],
            vec![],
        );
        refused(&ia5, "CN is a IA5String");
    }

    #[test]
    fn two_cns_two_os_or_any_other_attribute_are_refused() {
        let two_cn = with_subject(
            vec![
                (DnType::OrganizationName, utf8("system:nodes")),
                (DnType::CommonName, utf8("system:node:worker-1")),
                (DnType::CustomDnType(vec![2, 5, 4, 3]), utf8("system:node:master-0")),
            ],
            vec![],
        );
        refused(&two_cn, "exactly one CN and one O");
        let two_o = with_subject(
            vec![
                (DnType::OrganizationName, utf8("system:nodes")),
                (DnType::CustomDnType(vec![2, 5, 4, 10]), utf8("system:masters")),
                (DnType::CommonName, utf8("system:node:worker-1")),
            ],
            vec![],
        );
        refused(&two_o, "exactly one CN and one O");
        let no_o = with_subject(vec![(DnType::CommonName, utf8("system:node:worker-1"))], vec![]);
        refused(&no_o, "exactly one CN and one O");
        let ou = with_subject(
            vec![
                (DnType::OrganizationName, utf8("system:nodes")),
                (DnType::OrganizationalUnitName, utf8("x")),
                (DnType::CommonName, utf8("system:node:worker-1")),
            ],
            vec![],
        );
        refused(&ou, "the subject holds OU");
        let serial = with_subject(
            vec![
                (DnType::OrganizationName, utf8("system:nodes")),
                (DnType::CustomDnType(vec![2, 5, 4, 5]), utf8("1")),
                (DnType::CommonName, utf8("system:node:worker-1")),
            ],
            vec![],
        );
        refused(&serial, "the subject holds serialNumber");
    }

    /// A second subjectAltName beside the first: Go keeps the last, the reader must not pick.
    #[test]
    fn a_second_subject_alt_name_is_refused() {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "system:nodes");
        dn.push(DnType::CommonName, "system:node:master-0");
        p.distinguished_name = dn;
        p.subject_alt_names = vec![SanType::DnsName("master-0".try_into().unwrap())];
        // GeneralNames { dNSName "api.ocp4.example.com" }
        let host = b"api.ocp4.example.com";
        let mut der = vec![0x30, host.len() as u8 + 2, 0x82, host.len() as u8];
        der.extend(host);
        p.custom_extensions = vec![rcgen::CustomExtension::from_oid_content(&[2, 5, 29, 17], der)];
        let key = KeyPair::generate().unwrap();
        let pem = p.serialize_request(&key).unwrap().pem().unwrap().into_bytes();
        refused(&pem, "asks for extension 2.5.29.17 twice");
    }

    /// rcgen writes one attribute per RDN; a multi-valued RDN is made here by merging the
    /// two RDNs of a signed request's subject into one SET (the signature then fails, so the
    /// subject reader is called directly).
    #[test]
    fn a_multi_valued_rdn_is_refused() {
        // SET { SEQ{O, "system:nodes"}, SEQ{CN, "system:node:master-0"} } inside a SEQUENCE.
        let atv = |oid: &[u8], v: &str| {
            let mut s = vec![0x06, oid.len() as u8];
            s.extend_from_slice(oid);
            s.extend([0x0c, v.len() as u8]);
            s.extend(v.as_bytes());
            let mut out = vec![0x30, s.len() as u8];
            out.extend(s);
            out
        };
        let mut set = atv(&[0x55, 0x04, 0x0a], "system:nodes");
        set.extend(atv(&[0x55, 0x04, 0x03], "system:node:master-0"));
        let mut rdn = vec![0x31, set.len() as u8];
        rdn.extend(set);
        let mut name = vec![0x30, rdn.len() as u8];
        name.extend(rdn);
        let (_, n) = X509Name::from_der(&name).unwrap();
        let e = subject(&n).unwrap_err();
        assert!(e.0.contains("multi-valued RDN (O + CN in one set)"), "{e}");
    }

    /// A subject of one RDN per attribute, each attribute's OID given as raw DER bytes.
    fn name_of(attrs: &[(&[u8], &str)]) -> Vec<u8> {
        let mut rdns = Vec::new();
        for (oid, v) in attrs {
            let mut s = vec![0x06, oid.len() as u8];
            s.extend_from_slice(oid);
            s.extend([0x0c, v.len() as u8]);
            s.extend(v.as_bytes());
            let mut atv = vec![0x30, s.len() as u8];
            atv.extend(s);
            rdns.extend([0x31, atv.len() as u8]);
            rdns.extend(atv);
        }
        let mut name = vec![0x30, rdns.len() as u8];
        name.extend(rdns);
        name
    }

    /// Found by fuzz_csr_subject: `55 04 8a` (its last arc cut short) printed as 2.5.4.10 and
    /// was read as the O, which x509-parser's own lookups (and Go, which refuses the request)
    /// never see. Malformed OIDs are refused wherever they stand; well-formed ones still read.
    #[test]
    fn a_malformed_oid_is_refused_not_read_as_the_name_it_prints_as() {
        let cn: &[u8] = &[0x55, 0x04, 0x03];
        let ok = read_subject(&name_of(&[(&[0x55, 0x04, 0x0a], "system:nodes"), (cn, "system:node:m0")])).unwrap();
        assert_eq!(ok, ("system:node:m0".to_string(), "system:nodes".to_string()));
        for (oid, why) in [
            (&[0x55, 0x04, 0x8a][..], "a malformed OID (55 04 8a)"),
            (&[0x55, 0x04, 0x80, 0x0a][..], "non-minimal arc"),
            (&[0x55, 0x04, 0x88, 0x80, 0x80, 0x80, 0x00][..], "above 2^31-1"),
        ] {
            let e = read_subject(&name_of(&[(oid, "system:nodes"), (cn, "system:node:m0")])).unwrap_err();
            assert!(e.0.contains(why), "{oid:02x?}: {e}");
        }
        // 2^31-1 itself is an arc Go reads: refused only for not being CN or O.
        let e = read_subject(&name_of(&[(&[0x55, 0x04, 0x87, 0xff, 0xff, 0xff, 0x7f], "x"), (cn, "c")])).unwrap_err();
        assert!(e.0.contains("attribute 2.5.4.2147483647"), "{e}");
    }
}
