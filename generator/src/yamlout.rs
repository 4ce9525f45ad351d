//! `serde_json::Value` → YAML for manifests people read. Block style; strings JSON-quoted unless
//! plainly safe, so any YAML parser reads back exactly the same value.

use serde_json::Value;

pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    emit(v, 0, &mut out, false);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Several documents separated by `---`.
pub fn documents(vs: &[Value]) -> String {
    vs.iter().map(to_yaml).collect::<Vec<_>>().join("---\n")
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if plain_safe(s) => s.clone(),
        Value::String(s) => serde_json::to_string(s).expect("string"),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// Whether a YAML 1.1 reader (PyYAML, older Go and Java parsers) would take `s` for something
/// other than a string: a bool or null in any case (`Yes`, `OFF`, `Y`, `~`), an integer with
/// underscores or in binary, octal or hex (`1_000`, `0b101`, `0o17`, `017`), a sexagesimal number
/// (`12:30`, a MAC address), a float (`1e3`, `.inf`), or a timestamp (`2026-11-27T05:04:00Z`).
fn yaml11_special(s: &str) -> bool {
    const WORDS: &[&str] = &["", "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n"];
    if WORDS.contains(&s.to_ascii_lowercase().as_str()) {
        return true;
    }
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    let radix = ["0b", "0o", "0x"].iter().any(|p| body.to_ascii_lowercase().starts_with(p));
    let sexagesimal = body.contains(':') && body.split(':').all(|p| digits(p.split('.').next().unwrap_or(p)));
    // A date or timestamp (2026-11-27, 2026-11-27T05:04:00Z) is a timestamp to YAML 1.1.
    let b = s.as_bytes();
    let date = b.len() >= 8 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[5].is_ascii_digit();
    radix || digits(body) || sexagesimal || date || body.replace('_', "").parse::<f64>().is_ok()
}

/// A string that reads back as the same string when unquoted, by YAML 1.2 and 1.1 readers alike.
fn plain_safe(s: &str) -> bool {
    !yaml11_special(s)
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:@=+".contains(c))
        && !s.starts_with(['-', ':', '@', '.', '='])
        && !s.ends_with(':')
        && !s.contains(": ")
        && s.parse::<f64>().is_err()
        && !s.starts_with("0x")
        && !s.starts_with("0o")
}

fn emit(v: &Value, indent: usize, out: &mut String, in_seq: bool) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (i, (k, val)) in m.iter().enumerate() {
                // The first key of a mapping inside a sequence sits after "- ".
                if !(in_seq && i == 0) {
                    out.push_str(&pad);
                }
                out.push_str(&scalar(&Value::String(k.clone())));
                out.push(':');
                match val {
                    Value::Object(c) if !c.is_empty() => {
                        out.push('\n');
                        emit(val, indent + 2, out, false);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push('\n');
                        emit(val, indent, out, false);
                    }
                    Value::String(s) if s.contains('\n') => {
                        out.push_str(" |");
                        if s.starts_with(' ') {
                            out.push('2');
                        }
                        if !s.ends_with('\n') {
                            out.push('-');
                        }
                        out.push('\n');
                        for line in s.lines() {
                            if !line.is_empty() {
                                out.push_str(&" ".repeat(indent + 2));
                                out.push_str(line);
                            }
                            out.push('\n');
                        }
                    }
                    _ => {
                        out.push(' ');
                        out.push_str(&scalar(val));
                        out.push('\n');
                    }
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for item in a {
                out.push_str(&pad);
                out.push_str("- ");
                match item {
                    Value::Object(m) if !m.is_empty() => emit(item, indent + 2, out, true),
                    Value::Array(x) if !x.is_empty() => {
                        out.push('\n');
                        emit(item, indent + 2, out, false);
                    }
                    Value::String(s) if s.contains('\n') => {
                        out.push_str(&serde_json::to_string(s).expect("string"));
                        out.push('\n');
                    }
                    _ => {
                        out.push_str(&scalar(item));
                        out.push('\n');
                    }
                }
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_back_identically() {
        let v = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "labels": {"app": "etcd"}},
            "spec": {"hostNetwork": true, "containers": [{"name": "c", "command": ["/usr/bin/etcd", "--listen=", "--a=b: c", "true", "123", ""],
              "env": [{"name": "A", "value": "1.5"}], "securityContext": {"privileged": true}}], "volumes": [], "empty": {}},
            "data": {"install-config": "apiVersion: v1\nmetadata:\n  name: x\n", "noeol": "a\nb"},
            "nested": [[1, 2], ["a"]], "n": null
        });
        let y = to_yaml(&v);
        let back = crate::config::yaml::parse(&y).unwrap().value;
        assert_eq!(back, v, "{y}");
    }
}
