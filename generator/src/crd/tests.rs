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
    assert!(both.is_err_and(|e| matches!(&e, CrdError::Duplicate { file, other, .. } if file == "b.yaml" && other == "a.yaml")));
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

fn with_rule(rule: &str) -> CrdSet {
    set(vec![crd(
        "Gadget",
        json!({}),
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": [{"rule": rule, "message": "m"}],
                     "properties": {"names": {"type": "array", "items": {"type": "string"}}}}}}),
    )])
}

fn gadget(spec: Value) -> Value {
    json!({"apiVersion": "example.openshift.io/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec})
}

/// A rule of nested comprehensions over literals ran for a minute and took 673 MB before it
/// had a budget: now it is not evaluated, says why, and is never counted as passed.
#[test]
fn a_rule_over_the_cost_budget_is_not_evaluated_and_never_passes() {
    let l = format!("[{}]", (1..=30).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    let rule = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.map(d, [a, b, c, d]).size() == 30)))");
    let r = with_rule(&rule).check(&gadget(json!({})));
    assert_eq!(r.rules_checked, 0, "an over-budget rule was evaluated");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let why: Vec<&str> = r.rules_unchecked.iter().map(|u| u.why.as_str()).collect();
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("not evaluated: over budget"), "{why:?}");
    assert!(why[0].contains("1000000"), "{why:?}");
}

/// Cheap rules still run, literals and `self` alike; the bound grows with the object's size.
#[test]
fn rules_within_budget_run_and_the_bound_follows_the_object() {
    let s = with_rule("[1, 2, 3].all(x, x > 0) && self.names.all(n, n.size() < 8)");
    let ok = s.check(&gadget(json!({"names": ["a", "b"]})));
    assert_eq!((ok.rules_checked, ok.rules_unchecked.len()), (1, 0), "{:?}", ok.rules_unchecked);
    let bad = s.check(&gadget(json!({"names": ["a", "much-too-long"]})));
    assert_eq!(bad.problems.len(), 1, "{:?}", bad.problems);

    let program = |r: &str| ::cel::Program::compile(r).unwrap();
    let nested = program("self.all(a, self.all(b, a != b || true))");
    let small = cost::estimate(nested.expression(), 10);
    let large = cost::estimate(nested.expression(), 1000);
    assert!(small < 100_000, "{small}");
    assert!(large > 100 * small, "{small} {large}");
    // A list built by map and then iterated counts what map built.
    let built = program("[1,2,3,4,5,6,7,8,9,10].map(x, [1,2,3,4,5,6,7,8,9,10].map(y, y)).all(l, l.all(y, y > 0))");
    assert!(cost::estimate(built.expression(), 0) >= 100);
}

/// `--crds` reads regular files of a CRD's size: a FIFO does not block it, a 300 MB file is not
/// read whole, a file nested past any CRD is refused; each named.
#[test]
fn crd_files_that_are_not_crds_are_refused_by_name_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("a-fifo.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let dir = d.path().to_path_buf();
    std::thread::spawn(move || tx.send(CrdSet::load_dir(&dir).err()).unwrap());
    let err = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(e) => e.expect("a FIFO was taken for a CRD file"),
        Err(_) => {
            // Unblock the reader before failing, so the test process ends.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("load_dir blocked on a FIFO");
        }
    };
    assert!(
        matches!(&err, CrdError::File { path, why } if path.ends_with("a-fifo.yaml") && why.contains("not a regular file")),
        "{err}"
    );
    std::fs::remove_file(&fifo).unwrap();

    let big = d.path().join("big.yaml");
    std::fs::File::create(&big).unwrap().set_len(300 << 20).unwrap();
    let err = CrdSet::load_dir(d.path()).err().expect("a 300 MB file was taken");
    assert!(
        matches!(&err, CrdError::File { path, why } if path.ends_with("big.yaml") && why.contains("larger than")),
        "{err}"
    );
    std::fs::remove_file(&big).unwrap();

    std::fs::write(d.path().join("deep.yaml"), format!("{}1{}", "[".repeat(200), "]".repeat(200))).unwrap();
    let err = CrdSet::load_dir(d.path()).err().expect("a file nested 200 deep was taken");
    assert!(
        matches!(&err, CrdError::Yaml { place, message, .. } if place == "deep.yaml" && message.contains("nested more than")),
        "{err}"
    );
}
