//! Secrets out of text that leaves a node or the workstation (`hardshift gather`): private key
//! blocks, bearer tokens, the pull secret's `auth` values and kubeconfig key data. Pure.

/// `text` with every secret replaced by a marker naming what was there.
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // PEM private keys, whatever their kind (RSA, EC, ENCRYPTED, plain PKCS#8).
    while let Some(start) = rest.find("-----BEGIN ") {
        let header_end = rest[start..]
            .find("-----\n")
            .map(|i| start + i)
            .or_else(|| rest[start + 11..].find("-----").map(|i| start + 11 + i));
        let Some(h) = header_end else { break };
        let label = &rest[start + 11..h];
        if !label.contains("PRIVATE KEY") {
            out.push_str(&rest[..h + 5]);
            rest = &rest[h + 5..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str("[REDACTED PRIVATE KEY]");
        let end_marker = format!("-----END {label}-----");
        rest = match rest[h..].find(&end_marker) {
            Some(e) => &rest[h + e + end_marker.len()..],
            // An unterminated key: drop the rest rather than leak part of it.
            None => "",
        };
    }
    out.push_str(rest);
    let mut s = out;
    for key in [
        "\"auth\":",
        "\"auth\" :",
        "client-key-data:",
        "\"client-key-data\":",
        "token:",
        "\"token\":",
        "password:",
        "\"password\":",
    ] {
        s = redact_values(&s, key);
    }
    redact_after(&s, "Bearer ")
}

/// Replace the value after each `key` (quoted or up to the end of the token) with a marker.
fn redact_values(s: &str, key: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(key) {
        let after = i + key.len();
        out.push_str(&rest[..after]);
        let tail = &rest[after..];
        let trimmed = tail.trim_start();
        out.push_str(&tail[..tail.len() - trimmed.len()]);
        let (value_len, quoted) = if let Some(q) = trimmed.strip_prefix('"') {
            (q.find('"').map_or(trimmed.len(), |e| e + 2), true)
        } else {
            (
                trimmed
                    .find(|c: char| c.is_whitespace() || c == ',' || c == '}')
                    .unwrap_or(trimmed.len()),
                false,
            )
        };
        if value_len > 0 {
            out.push_str(if quoted { "\"[REDACTED]\"" } else { "[REDACTED]" });
        }
        rest = &trimmed[value_len..];
    }
    out.push_str(rest);
    out
}

fn redact_after(s: &str, marker: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(marker) {
        out.push_str(&rest[..i + marker.len()]);
        let tail = &rest[i + marker.len()..];
        let n = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        out.push_str("[REDACTED]");
        rest = &tail[n..];
    }
    out.push_str(rest);
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
