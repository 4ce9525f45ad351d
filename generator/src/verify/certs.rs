//! Every planned key and certificate (pair, mode, SANs and usages, chain, dates) and every
//! kubeconfig (server, client pair, CA).

use super::{check, text, Check, Status};
use crate::bundle::Bundle;
use crate::config::yaml;
use crate::kubeconfig;
use crate::pki::inspect::{self, Facts};
use crate::pki::{CertSpec, Kind};
use base64::Engine;
use time::OffsetDateTime;

const WARN_BEFORE_DAYS: i64 = 30;

fn date(ts: i64) -> String {
    OffsetDateTime::from_unix_timestamp(ts)
        .map(|t| t.date().to_string())
        .unwrap_or_default()
}

pub(super) fn cert(s: &CertSpec, specs: &[CertSpec], b: &Bundle, now: OffsetDateTime) -> Check {
    let id = s.id();
    let key_path = format!("{id}.key");
    let Some(key) = text(b, &key_path) else {
        return check(&id, Status::Fail, format!("{key_path} is missing"));
    };
    let mut problems: Vec<String> = Vec::new();
    if b.files[&key_path].mode & 0o077 != 0 {
        problems.push(format!(
            "{key_path} has mode {:o}; private keys must be 0600",
            b.files[&key_path].mode
        ));
    }
    let key_spki = match inspect::spki_of_key(&key) {
        Ok(k) => k,
        Err(e) => return check(&id, Status::Fail, format!("{key_path}: {e}")),
    };
    if s.kind == Kind::KeyOnly {
        return key_pair(&id, &key, &key_path, b, problems);
    }
    let Some(pem) = text(b, &format!("{id}.crt")) else {
        return check(&id, Status::Fail, format!("{id}.crt is missing"));
    };
    let f = match inspect::facts(&pem) {
        Ok(f) => f,
        Err(e) => return check(&id, Status::Fail, e.to_string()),
    };
    let mut c = check(&id, Status::Ok, "");
    c.subject = f.cn.clone();
    c.issuer = s.issuer.clone().unwrap_or_else(|| "self".into());
    c.expires = date(f.not_after);
    if f.spki != key_spki {
        problems.push("the key does not belong to the certificate".into());
    }
    if let Some(m) = inspect::mismatch(s, &f) {
        problems.push(m);
    }
    chain(s, &pem, specs, b, &mut problems);
    dated(c, &f, problems, now)
}

/// A key without a certificate (the service-account signer): its `.pub` is its public half.
fn key_pair(id: &str, key: &str, key_path: &str, b: &Bundle, mut problems: Vec<String>) -> Check {
    let want = crate::pki::keys::public_pem(key).unwrap_or_default();
    let pub_ok = text(b, &format!("{id}.pub")).is_some_and(|p| p.trim() == want.trim());
    if !pub_ok {
        problems.push(format!("{id}.pub is missing or is not the public half of {key_path}"));
    }
    finish(check(id, Status::Ok, "key pair"), problems)
}

/// Walk the chain to the self-signed root, verifying every signature.
fn chain(s: &CertSpec, pem: &str, specs: &[CertSpec], b: &Bundle, problems: &mut Vec<String>) {
    let mut cur = (s.clone(), pem.to_string());
    for _ in 0..8 {
        let Some(issuer) = cur.0.issuer_id() else {
            if let Err(e) = inspect::signed_by(&cur.1, &cur.1) {
                problems.push(format!("root {} is not self-signed: {e}", cur.0.id()));
            }
            break;
        };
        let Some(ipem) = text(b, &format!("{issuer}.crt")) else {
            problems.push(format!("{issuer}.crt is missing"));
            break;
        };
        if let Err(e) = inspect::signed_by(&cur.1, &ipem) {
            problems.push(format!("{} → {issuer}: {e}", cur.0.id()));
            break;
        }
        match specs.iter().find(|x| x.id() == issuer) {
            Some(next) => cur = (next.clone(), ipem.to_string()),
            None => break,
        }
    }
}

/// The certificate's dates against `now` (a warning a month before it expires), then the verdict:
/// its usages and SANs when all is well, else every problem.
fn dated(mut c: Check, f: &Facts, mut problems: Vec<String>, now: OffsetDateTime) -> Check {
    let t = now.unix_timestamp();
    if f.not_before > t {
        problems.push(format!("not valid before {} (is this machine's clock right?)", date(f.not_before)));
    }
    if f.not_after <= t {
        problems.push(format!("expired on {}", date(f.not_after)));
    } else if problems.is_empty() && f.not_after - t < WARN_BEFORE_DAYS * 86400 {
        c.status = Status::Warn;
        c.detail = format!("expires in {} days; re-run `hardshift create` to renew", (f.not_after - t) / 86400);
        return c;
    }
    if problems.is_empty() {
        let sans = f.dns.len() + f.ips.len();
        c.detail = format!(
            "{}{}",
            inspect::usage_words(f.server_auth, f.client_auth).replace("none", "CA"),
            if sans > 0 { format!(", {sans} SANs") } else { String::new() }
        );
    }
    finish(c, problems)
}

fn finish(mut c: Check, problems: Vec<String>) -> Check {
    if !problems.is_empty() {
        c.status = Status::Fail;
        c.detail = problems.join("; ");
    }
    c
}

pub(super) fn kubeconfig_check(k: &kubeconfig::Kubeconfig, b: &Bundle) -> Check {
    let fail = |d: String| check(&k.path, Status::Fail, d);
    let Some(t) = text(b, &k.path) else { return fail("missing".into()) };
    let doc = match yaml::parse(&t) {
        Ok(d) => d.value,
        Err(e) => return fail(format!("not YAML: {}", e.message)),
    };
    let dec = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
            .and_then(|b| String::from_utf8(b).ok())
    };
    let server = doc["clusters"][0]["cluster"]["server"].as_str().unwrap_or_default();
    let ca = dec(&doc["clusters"][0]["cluster"]["certificate-authority-data"]);
    let crt = dec(&doc["users"][0]["user"]["client-certificate-data"]);
    let key = dec(&doc["users"][0]["user"]["client-key-data"]);
    let (Some(ca), Some(crt), Some(key)) = (ca, crt, key) else {
        return fail("certificate-authority-data, client-certificate-data or client-key-data is missing".into());
    };
    if server != k.server {
        return fail(format!("server is {server:?}, should be {:?}", k.server));
    }
    if inspect::spki_of_key(&key).ok() != inspect::facts(&crt).ok().map(|f| f.spki) {
        return fail("client key does not belong to the client certificate".into());
    }
    // The first CA in the data must have signed the client certificate.
    let first_ca = ca.split_inclusive("-----END CERTIFICATE-----\n").next().unwrap_or("");
    if let Err(e) = inspect::signed_by(&crt, first_ca) {
        return fail(format!("client certificate does not verify against the embedded CA: {e}"));
    }
    let mut c = check(&k.path, Status::Ok, format!("server {server}"));
    c.subject = inspect::facts(&crt).map(|f| f.cn).unwrap_or_default();
    c
}
