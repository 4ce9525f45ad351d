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

/// A string that reads back as the same string when unquoted.
fn plain_safe(s: &str) -> bool {
    let reserved = [
        "", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", "yes", "no", "on", "off", "y", "n",
    ];
    !reserved.contains(&s)
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
