use super::*;
use serde_json::json;

fn crd(kind: &str, annotations: Value, schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}s.example.openshift.io", kind.to_lowercase()), "annotations": annotations},
        "spec": {"group": "example.openshift.io", "names": {"kind": kind},
                 "versions": [{"name": "v1", "served": true, "schema": {"openAPIV3Schema": schema}}]}
    })
}

fn widget() -> Value {
    crd(
        "Widget",
        json!({}),
        json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {"type": "object", "required": ["mode"], "properties": {
                "mode": {"type": "string", "enum": ["Fast", "Slow"]},
                "replicas": {"type": "integer", "minimum": 1, "default": 3},
                "port": {"x-kubernetes-int-or-string": true},
                "note": {"type": "string", "nullable": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "address": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "isIP(self) && ip(self).family() == 4", "message": "an IPv4 address"}]},
                "network": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "isCIDR(self) && cidr(self).prefixLength() <= 24", "message": "a /24 or larger"},
                    {"rule": "self == oldSelf", "message": "immutable"},
                    {"rule": "self.frobnicate()", "message": "no such function"}]},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
            }},
            "status": {"type": "object", "properties": {"apiServerInternalURI": {"type": "string"}}}
        }}),
    )
}

fn set(docs: Vec<Value>) -> CrdSet {
    CrdSet::select(docs.into_iter().enumerate().map(|(i, d)| (format!("f{i}.yaml"), d)).collect()).unwrap()
}

fn obj(spec: Value, status: Value) -> Value {
    let mut o = json!({"apiVersion": "example.openshift.io/v1", "kind": "Widget", "metadata": {"name": "w", "annotations": {"x": "y"}},
           "spec": spec});
    if !status.is_null() {
        o["status"] = status;
    }
    o
}

fn paths(r: &Report) -> Vec<String> {
    r.problems.iter().map(|p| p.path.clone()).collect()
}

#[test]
fn a_valid_object_passes_with_defaults_and_rules_counted() {
    let s = set(vec![widget()]);
    let r = s.check(&obj(
        json!({"mode": "Fast", "port": 8080, "note": null, "labels": {"a": "b"}, "free": {"anything": [1]},
               "address": "10.0.0.1", "network": "10.0.0.0/16", "items": [{"name": "x"}]}),
        json!({"apiServerInternalURI": "https://api-int:6443"}),
    ));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.crd_file.as_deref(), Some("f0.yaml"));
    assert_eq!(r.rules_checked, 2);
    let why: Vec<&str> = r.rules_unchecked.iter().map(|u| u.why.as_str()).collect();
    assert_eq!(r.rules_unchecked.len(), 2, "{why:?}");
    assert!(why[0].contains("oldSelf"), "{why:?}");
}

#[test]
fn an_undeclared_field_is_pruned_with_a_did_you_mean() {
    let s = set(vec![widget()]);
    let r = s.check(&obj(
        json!({"mode": "Fast", "items": [{"name": "x", "nmae": "y"}]}),
        json!({"apiServerInternalURL": "https://api-int:6443"}),
    ));
    assert_eq!(
        paths(&r),
        [".spec.items[0].nmae", ".status.apiServerInternalURL"],
        "{:?}",
        r.problems
    );
    assert!(
        r.problems[1].message.contains("did you mean `apiServerInternalURI`?"),
        "{}",
        r.problems[1]
    );
    assert!(r.problems[1].message.contains("prunes it silently"));
}

#[test]
fn types_enums_bounds_required_and_nulls_are_refused() {
    let s = set(vec![widget()]);
    let r = s.check(&obj(json!({"replicas": 0, "port": true, "labels": {"a": 1}}), json!({})));
    let p = paths(&r);
    for want in [".spec", ".spec.replicas", ".spec.port", ".spec.labels.a"] {
        assert!(p.contains(&want.to_string()), "{want} missing from {:?}", r.problems);
    }
    let r = s.check(&obj(json!({"mode": "Medium", "address": null}), json!({})));
    assert_eq!(paths(&r), [".spec.mode", ".spec.address"], "{:?}", r.problems);
}

#[test]
fn a_failing_cel_rule_names_its_message() {
    let s = set(vec![widget()]);
    let r = s.check(&obj(
        json!({"mode": "Slow", "address": "fd00::1", "network": "10.0.0.0/8"}),
        json!({}),
    ));
    assert!(
        r.problems
            .iter()
            .any(|p| p.path == ".spec.address" && p.message.contains("an IPv4 address")),
        "{:?}",
        r.problems
    );
    assert!(!r.problems.iter().any(|p| p.path == ".spec.network"), "{:?}", r.problems);
    let r = s.check(&obj(json!({"mode": "Slow", "network": "10.0.0.0/25"}), json!({})));
    assert!(
        r.problems
            .iter()
            .any(|p| p.path == ".spec.network" && p.message.contains("a /24 or larger")),
        "{:?}",
        r.problems
    );
}

#[test]
fn only_the_default_feature_set_of_a_self_managed_cluster_is_selected() {
    let tech = crd(
        "Widget",
        json!({"release.openshift.io/feature-set": "TechPreviewNoUpgrade"}),
        json!({"type": "object"}),
    );
    let hypershift = crd(
        "Widget",
        json!({"include.release.openshift.io/ibm-cloud-managed": "true", "release.openshift.io/feature-set": "Default"}),
        json!({"type": "object"}),
    );
    let s = set(vec![tech.clone(), hypershift, widget()]);
    assert_eq!(s.crds.len(), 1);
    assert_eq!(s.crds[0].file, "f2.yaml");
    let both = CrdSet::select(vec![("a.yaml".into(), widget()), ("b.yaml".into(), widget())]);
    assert!(both.is_err_and(|e| e.contains("a.yaml") && e.contains("b.yaml")));
}

#[test]
fn kinds_without_a_crd_and_built_in_kinds() {
    let s = set(vec![widget()]);
    let r = s.check(&json!({"apiVersion": "example.openshift.io/v1", "kind": "Gadget", "metadata": {"name": "g"}}));
    assert!(r.problems[0].message.contains("no CRD of the release serves"), "{:?}", r.problems);
    let r = s.check(&json!({"apiVersion": "example.openshift.io/v2", "kind": "Widget", "metadata": {"name": "w"}}));
    assert!(r.problems[0].message.contains("serves example.openshift.io/v1"), "{:?}", r.problems);
    for core in ["v1", "rbac.authorization.k8s.io/v1", "apps/v1"] {
        let r = s.check(&json!({"apiVersion": core, "kind": "ConfigMap", "metadata": {"name": "c"}, "bogus": 1}));
        assert!(r.problems.is_empty() && r.crd_file.is_none(), "{core}");
    }
}

#[test]
fn documents_split_on_separator_lines_only() {
    let d = split_documents("# head\n---\na: 1\n---\n\n---\nb: '---'\n");
    assert_eq!(d, ["a: 1\n", "b: '---'\n"]);
}

#[test]
fn patterns_use_re2_syntax() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "url": {"type": "string", "pattern": "^https://[^[:punct:]\\s]+$"}}}}});
    let s = set(vec![crd("Widget", json!({}), schema)]);
    let r = s.check(&obj(json!({"url": "https://console"}), json!(null)));
    assert!(r.problems.iter().all(|p| p.path != ".spec.url"), "{:?}", r.problems);
    let r = s.check(&obj(json!({"url": "https://con.sole"}), json!(null)));
    assert!(
        r.problems
            .iter()
            .any(|p| p.path == ".spec.url" && p.message.contains("does not match")),
        "{:?}",
        r.problems
    );
}

#[test]
fn duplicates_in_sets_and_map_lists_are_refused() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}}});
    let s = set(vec![crd("Widget", json!({}), schema)]);
    let r = s.check(&obj(
        json!({"tags": ["a", "b"], "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 1}]}),
        json!(null),
    ));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let r = s.check(&obj(
        json!({"tags": ["a", "a"], "ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}),
        json!(null),
    ));
    assert_eq!(paths(&r), [".spec.tags", ".spec.ports"], "{:?}", r.problems);
}
