//! Structural defaulting and pruning, as the API server does on every write: a missing field
//! whose schema has a `default` gets it; a field the schema does not declare is dropped (each one
//! is a problem here: on a real cluster it vanishes without a word). The walk follows
//! `properties`, `additionalProperties`, `items`, `x-kubernetes-preserve-unknown-fields` and
//! `x-kubernetes-embedded-resource`; `allOf`/`anyOf`/`oneOf` never declare fields (structural rule).

use super::Problem;
use crate::config::schema::did_you_mean;
use serde_json::Value;

pub fn walk(schema: &Value, obj: &mut Value, object: &str, out: &mut Vec<Problem>) {
    node(schema, obj, "", true, object, out);
}

fn node(s: &Value, v: &mut Value, path: &str, resource: bool, object: &str, out: &mut Vec<Problem>) {
    match v {
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            if let Some(props) = props {
                for (k, ps) in props {
                    if let (None, Some(d)) = (map.get(k), ps.get("default")) {
                        map.insert(k.clone(), d.clone());
                    }
                }
            }
            let preserve = s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            for (k, child) in map.iter_mut() {
                let here = format!("{path}.{k}");
                // apiVersion, kind and metadata of a resource are the server's own to judge.
                if resource && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    let embedded = ps.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
                    node(ps, child, &here, embedded, object, out);
                    continue;
                }
                match s.get("additionalProperties") {
                    Some(a @ Value::Object(_)) => {
                        node(a, child, &here, false, object, out);
                        continue;
                    }
                    Some(Value::Bool(true)) => continue,
                    _ if preserve => continue,
                    _ => {}
                }
                let declared: Vec<&str> = props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
                let hint = match did_you_mean(k, &declared) {
                    Some(best) => format!("; did you mean `{best}`?"),
                    None if declared.is_empty() => "; the schema declares no fields here".into(),
                    None => format!("; declared here: {}", declared.join(", ")),
                };
                out.push(Problem {
                    object: object.to_string(),
                    path: here,
                    message: format!("field not declared by the CRD: a real API server prunes it silently{hint}"),
                });
            }
        }
        Value::Array(items) => {
            if let Some(dup) = duplicate(s, items) {
                out.push(Problem {
                    object: object.to_string(),
                    path: path.to_string(),
                    message: dup,
                });
            }
            if let Some(is) = s.get("items") {
                for (i, it) in items.iter_mut().enumerate() {
                    node(is, it, &format!("{path}[{i}]"), false, object, out);
                }
            }
        }
        _ => {}
    }
}

/// A list the schema declares a set, or a map keyed by `x-kubernetes-list-map-keys`, that holds
/// an item twice: the API server refuses it ("Duplicate value").
fn duplicate(s: &Value, items: &[Value]) -> Option<String> {
    let keys: Vec<&str> = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => Vec::new(),
        Some("map") => s
            .get("x-kubernetes-list-map-keys")?
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .collect(),
        _ => return None,
    };
    let id = |v: &Value| -> Value {
        if keys.is_empty() {
            v.clone()
        } else {
            Value::Array(keys.iter().map(|k| v.get(*k).cloned().unwrap_or(Value::Null)).collect())
        }
    };
    for (i, a) in items.iter().enumerate() {
        if let Some(j) = items[..i].iter().position(|b| id(b) == id(a)) {
            let what = if keys.is_empty() {
                "a set".to_string()
            } else {
                format!("a map keyed by {}", keys.join(", "))
            };
            return Some(format!(
                "items [{j}] and [{i}] are the same in {what}: the API server refuses a duplicate"
            ));
        }
    }
    None
}
