//! A CRD's openAPIV3Schema as the draft-4 JSON Schema a well-kept validator understands: the
//! Kubernetes extensions that change what is valid (`nullable`, `x-kubernetes-int-or-string`)
//! become plain keywords; what only annotates (`description`, `default`, `format`, the other
//! `x-kubernetes-*`) is left out.

use serde_json::{json, Map, Value};

/// Keywords copied as they are: their meaning is the same in both.
/// `pattern` is not among them: Kubernetes matches it with Go's RE2 (`[^[:punct:]]` is valid), and
/// the validator checks every pattern of a schema as ECMA-262 first; [`patterns`] checks them.
const SAME: &[&str] = &[
    "type",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "required",
];

pub fn to_json_schema(s: &Value) -> Value {
    let Some(obj) = s.as_object() else {
        return s.clone();
    };
    let mut out = Map::new();
    for k in SAME {
        if let Some(v) = obj.get(*k) {
            out.insert((*k).into(), v.clone());
        }
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        let p: Map<String, Value> = props.iter().map(|(k, v)| (k.clone(), to_json_schema(v))).collect();
        out.insert("properties".into(), Value::Object(p));
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            out.insert("additionalProperties".into(), json!(b));
        }
        Some(v @ Value::Object(_)) => {
            out.insert("additionalProperties".into(), to_json_schema(v));
        }
        _ => {}
    }
    if let Some(items) = obj.get("items") {
        out.insert("items".into(), to_json_schema(items));
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = obj.get(k) {
            out.insert(k.into(), Value::Array(list.iter().map(to_json_schema).collect()));
        }
    }
    if let Some(not) = obj.get("not") {
        out.insert("not".into(), to_json_schema(not));
    }
    if obj.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        out.insert("type".into(), json!(["integer", "string"]));
    }
    if obj.get("nullable") == Some(&json!(true)) {
        if let Some(Value::String(t)) = out.get("type").cloned() {
            out.insert("type".into(), json!([t, "null"]));
        }
        if let Some(Value::Array(e)) = out.get_mut("enum") {
            if !e.contains(&Value::Null) {
                e.push(Value::Null);
            }
        }
    }
    Value::Object(out)
}

pub fn validator(schema: &Value) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(false)
        .build(&to_json_schema(schema))
}

/// Every string whose schema (through `properties`, `additionalProperties`, `items` and `allOf`)
/// has a `pattern` it does not match, as (path, message). The regex crate's syntax is RE2's.
pub fn patterns(s: &Value, v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    super::visit(s, v, path, true, &mut |s, v, path| {
        if let (Some(p), Value::String(text)) = (s.get("pattern").and_then(Value::as_str), v) {
            match regex::Regex::new(p) {
                Ok(re) if re.is_match(text) => {}
                Ok(_) => out.push((path.to_string(), format!("{text:?} does not match the pattern `{p}`"))),
                Err(e) => out.push((path.to_string(), format!("the schema's pattern `{p}` does not compile: {e}"))),
            }
        }
    });
}
