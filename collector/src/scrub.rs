//! Secrets out of text that leaves a node or the workstation (`hardshift gather`, the
//! dashboard's log view, `hardshift logs`, what the terminal shows). Pure. By structure first:
//! private key blocks, whole or cut (a window of lines that starts inside one, or a key escaped
//! onto one line); then by pattern (credentials in JSON, escaped JSON, YAML, flags, query strings,
//! HTTP headers, bearer and OAuth tokens, JWTs, cookies); then by value (the bundle's own
//! secrets, wherever they appear, when the caller knows them).
//!
//! One scrubber for every output: the terminal (`for_terminal`), every `-o json` and the
//! dashboard's JSON (`Scrubber::json`), the dashboard's pages and live updates (`Scrubber::report`
//! on what it reads from the store), and logs fetched from nodes.

use hardshift_proto::v1::{ComponentState, ContainerInfo, HostState, NodeReport, PodInfo};
use regex::{Regex, RegexBuilder};
use std::sync::OnceLock;

const MARK: &str = "[REDACTED]";
const KEY_MARK: &str = "[REDACTED PRIVATE KEY]";

/// `text` with every secret it can tell replaced by a marker naming what was there.
pub fn scrub(text: &str) -> String {
    Scrubber::default().scrub(text)
}

/// A scrubber that also knows secret values by heart (the kubeadmin password, the pull
/// secret's credentials): they are redacted wherever they appear, in any form.
#[derive(Debug, Default, Clone)]
pub struct Scrubber {
    values: Vec<String>,
}

impl Scrubber {
    /// Redact `values` too (and their base64), each of 6 characters or more (shorter ones would
    /// hit ordinary words).
    pub fn with_values(values: impl IntoIterator<Item = String>) -> Scrubber {
        use base64::Engine;
        let mut v: Vec<String> = Vec::new();
        for s in values.into_iter().filter(|s| s.len() >= 6) {
            v.push(base64::engine::general_purpose::STANDARD.encode(&s));
            v.push(s);
        }
        v.sort_by_key(|s| std::cmp::Reverse(s.len()));
        v.dedup();
        Scrubber { values: v }
    }

    pub fn scrub(&self, text: &str) -> String {
        let mut s = private_keys(text);
        for re in patterns() {
            // Again until nothing changes: a pattern that looks past its value (`after`) takes
            // the separator the next key on the line starts with.
            for _ in 0..8 {
                let next = re.replace_all(&s, replace);
                if next == s {
                    break;
                }
                s = next.into_owned();
            }
        }
        for v in &self.values {
            if s.contains(v.as_str()) {
                s = s.replace(v.as_str(), MARK);
            }
        }
        s
    }

    /// Every string in `v` scrubbed (object keys are names, not values: kept): the `-o json`
    /// outputs and the dashboard's JSON, cleaned the same way as the terminal.
    pub fn json(&self, v: &mut serde_json::Value) {
        use serde_json::Value;
        match v {
            Value::String(s) => *s = self.scrub(s),
            Value::Array(a) => a.iter_mut().for_each(|v| self.json(v)),
            Value::Object(o) => o.values_mut().for_each(|v| self.json(v)),
            _ => {}
        }
    }

    /// Every text of a node's report scrubbed: what the dashboard shows of it. The fields are
    /// named one by one, without `..`, so a text field added to the protocol does not compile
    /// until it is scrubbed here too.
    pub fn report(&self, r: &mut NodeReport) {
        let NodeReport {
            seq: _,
            time_ms: _,
            dropped_before: _,
            components,
            host,
            pods,
            containers,
        } = r;
        for c in components {
            let ComponentState {
                name,
                health: _,
                state,
                reason,
                details,
            } = c;
            for s in [name, state, reason] {
                *s = self.scrub(s);
            }
            details.values_mut().for_each(|v| *v = self.scrub(v));
        }
        if let Some(h) = host {
            #[rustfmt::skip]
            let HostState { hostname, boot_id, addresses, uptime_seconds: _, load1: _, memory_total_bytes: _,
                memory_available_bytes: _, root_free_bytes: _, var_free_bytes: _, clock_offset_ms: _,
                clock_offset_known: _, cpus: _ } = h;
            for s in [hostname, boot_id].into_iter().chain(addresses.iter_mut()) {
                *s = self.scrub(s);
            }
        }
        for p in pods {
            let PodInfo {
                id,
                namespace,
                name,
                ready: _,
                created_ms: _,
            } = p;
            for s in [id, namespace, name] {
                *s = self.scrub(s);
            }
        }
        for c in containers {
            #[rustfmt::skip]
            let ContainerInfo { id, pod, name, state, attempt: _, exit_code: _, reason, message, image, finished_ms: _ } = c;
            for s in [id, pod, name, state, reason, message, image] {
                *s = self.scrub(s);
            }
        }
    }
}

/// A match becomes its `keep` group, the marker, then its `after` group (what the pattern had
/// to see after the secret, e.g. the `@` of `user:pass@host`). A value already the marker is
/// left as is, so scrubbing twice changes nothing.
fn replace(c: &regex::Captures) -> String {
    let keep = c.name("keep").map_or("", |m| m.as_str());
    let after = c.name("after").map_or("", |m| m.as_str());
    let whole = &c[0];
    let value = &whole[keep.len()..whole.len() - after.len()];
    if value.starts_with(MARK) || value.starts_with("[REDACTED") {
        return whole.to_string();
    }
    format!("{keep}{MARK}{after}")
}

/// Each pattern names what stays before the marker (`keep`) and, when it had to look past the
/// secret, what stays after it (`after`): the key stays readable and its value goes.
fn patterns() -> &'static [Regex] {
    static P: OnceLock<Vec<Regex>> = OnceLock::new();
    P.get_or_init(|| {
        let ci = |p: &str| RegexBuilder::new(p).case_insensitive(true).build().expect("a valid pattern");
        // Words that name a secret at the end of any identifier (DB_PASSWORD, PGPASSWORD,
        // registryToken, aws_secret_access_key, privateKey), and short ones that do only alone
        // or after a separator (auth, X-Registry-Auth, DB_PASS; not bypass, not oauth_url).
        let strong = r"[a-z0-9_.\-]*(?:password|passwd|passphrase|secret|token|private[_\-]?key|secret[_\-]?access[_\-]?key|api[_\-]?key|client-key-data|credentials?|\.dockerconfigjson|identitytoken|registrytoken)";
        let weak = r"(?:[a-z0-9]+[_.\-])*(?:auth|pass|pwd)";
        let keys = format!("(?:{strong}|{weak})");
        vec![
            // JSON, also escaped inside another JSON string: "auth":"…" or \"auth\":\"…\".
            ci(&format!(r#"(?P<keep>(?:\\*")(?:{keys})(?:\\*")\s*:\s*\\*")[^"\\]*"#)),
            // YAML and `Key: value` lines and headers (PASSWORD: x, X-Registry-Auth: x). A
            // value that ends in a colon is a label ("auth: host:5000: refused"), not a secret.
            ci(&format!(
                r#"(?P<keep>(?:^|[\s{{,\[(])(?:{keys})\s*:[ \t]*)[^\s"',}}\]\\](?:[^\s,}}\]\\]*[^\s,}}\]\\:])?(?P<after>[\s,}}\]\\"']|$)"#
            )),
            // Query strings, environment and ini files: password=x, DB_PASSWORD="x", key = x.
            ci(&format!(r#"(?P<keep>(?:^|[\s?&;,"'(])(?:{keys})[ \t]*=[ \t]*["']?)[^\s&;,"')]+"#)),
            ci(r#"(?P<keep>(?:^|\s)--?(?:password|passwd|passphrase|token|client-secret)(?:=|\s+))[^\s"']+"#),
            // curl and friends: -u user:pass, --user=user:pass, --proxy-user user:pass.
            ci(r#"(?P<keep>(?:^|\s)(?:-u|-U|--user|--proxy-user|--(?:src-|dest-)?creds)(?:=|\s*)['"]?[^\s:'"]*:)[^\s'"]+"#),
            // Credentials in a URL: scheme://user:pass@host.
            ci(r"(?P<keep>\b[a-z][a-z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+(?P<after>@)"),
            // HTTP authorization, whatever its case and whitespace: Bearer, Basic, ....
            ci(r"(?P<keep>\b(?:bearer|basic|negotiate|digest)[ \t]+)[A-Za-z0-9._~+/=\-]{6,}"),
            // Cookies: the rest of the header.
            ci(r"(?P<keep>\b(?:set-)?cookie:[ \t]*)[^\r\n]+"),
            // OpenShift OAuth tokens and JWTs (service-account tokens) wherever they stand.
            Regex::new(r"sha256~[A-Za-z0-9_\-]{16,}").expect("a valid pattern"),
            Regex::new(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}").expect("a valid pattern"),
        ]
    })
}

/// Whether a line carries (part of) a PEM body: its last word base64 only, long enough not to be
/// a word (a journal line has its time, host and process before it). Only asked next to a
/// BEGIN or END of a private key, so a container ID at a line's end elsewhere is left alone.
fn pem_body(line: &str) -> bool {
    let t = line.trim().rsplit([' ', '\t']).next().unwrap_or("");
    t.len() >= 16 && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
}

/// Private key blocks out, by structure: a whole block (real or escaped newlines), a block cut
/// at the end (its body dropped, not the rest of the text), and the tail of a block whose BEGIN
/// is before the window (the body lines before an END … PRIVATE KEY line).
fn private_keys(text: &str) -> String {
    // One-line forms first: a key escaped into a string ("-----BEGIN …-----\nMII…\n-----END …-----").
    static ONE_LINE: OnceLock<Regex> = OnceLock::new();
    let one = ONE_LINE.get_or_init(|| {
        Regex::new(r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----(?:\\+[nr]|[A-Za-z0-9+/=\s])*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)")
            .expect("a valid pattern")
    });
    let text = one.replace_all(text, KEY_MARK);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(at) = line.find("-----BEGIN ").filter(|_| line.contains("PRIVATE KEY-----")) {
            // Whatever stands before the block on its line stays.
            out.push_str(&line[..at]);
            out.push_str(KEY_MARK);
            i += 1;
            while i < lines.len() && pem_body(lines[i]) {
                i += 1;
            }
            let end = lines.get(i).filter(|l| l.contains("-----END ") && l.contains("PRIVATE KEY-----"));
            match end {
                Some(l) => {
                    let after = &l[l.find("PRIVATE KEY-----").map_or(0, |p| p + 16)..];
                    out.push_str(after);
                    i += 1;
                }
                None => out.push('\n'),
            }
            continue;
        }
        if line.contains("-----END ") && line.contains("PRIVATE KEY-----") {
            // The window began inside a block: its body lines, already written, go too.
            let mut keep = out.len();
            let mut back: Vec<&str> = out.split_inclusive('\n').collect();
            while back.last().is_some_and(|l| pem_body(l)) {
                keep -= back.pop().map_or(0, str::len);
            }
            out.truncate(keep);
            out.push_str(KEY_MARK);
            let after = &line[line.find("PRIVATE KEY-----").map_or(0, |p| p + 16)..];
            out.push_str(after);
            i += 1;
            continue;
        }
        out.push_str(line);
        i += 1;
    }
    if !text.ends_with('\n') && out.ends_with('\n') && !text.is_empty() && out.ends_with(&format!("{KEY_MARK}\n")) {
        out.pop();
    }
    out
}

/// Text a node sent, made safe for a terminal: secrets scrubbed, then every control character
/// (escape sequences that clear the screen, recolour or move the cursor; carriage returns; bell)
/// and every bidirectional override shown as an escape (`\u{1b}`) rather than obeyed.
pub fn for_terminal(text: &str) -> String {
    let s = scrub(text);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}');
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tokens_and_auths_are_redacted_and_the_rest_is_kept() {
        let t = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nb\n-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n";
        let s = scrub(t);
        assert!(!s.contains("MIIE") && s.contains("[REDACTED PRIVATE KEY]"), "{s}");
        assert!(s.contains("MIIC"), "certificates are public: {s}");
        assert!(s.starts_with("a\n") && s.contains("\nb\n"));
        let j = r#"{"auths":{"r:5000":{"auth":"aGFyZHNoaWZ0OmV4YW1wbGU=","email":"x"}}}"#;
        let s = scrub(j);
        assert!(
            !s.contains("aGFyZHNo") && s.contains(r#""auth":"[REDACTED]""#) && s.contains("email"),
            "{s}"
        );
        let s = scrub("Authorization: Bearer eyJhbGciOi.abc.def rest");
        assert_eq!(s, "Authorization: Bearer [REDACTED] rest");
        let s = scrub("    client-key-data: LS0tLS1CRUdJTi\n    token: abc123\n");
        assert!(!s.contains("LS0tLS1") && !s.contains("abc123"), "{s}");
        // A key cut off mid-way is dropped whole.
        let s = scrub("x -----BEGIN EC PRIVATE KEY-----\nMHcC");
        assert_eq!(s, "x [REDACTED PRIVATE KEY]");
        assert_eq!(scrub("nothing secret here"), "nothing secret here");
    }

    #[test]
    fn terminal_text_shows_control_characters_instead_of_obeying_them() {
        let t = for_terminal("unhealthy \u{1b}[2J\u{1b}[31mred\r\u{7} Bearer sekrit \u{202e}evil");
        assert!(!t.chars().any(|c| c.is_control() || c == '\u{202e}'), "{t:?}");
        assert!(t.contains("\\u{1b}[2J") && t.contains("\\r") && t.contains("\\u{202e}"), "{t}");
        assert!(!t.contains("sekrit"), "{t}");
        assert_eq!(for_terminal("kubelet ok: 3 pods"), "kubelet ok: 3 pods");
    }
}
