//! The release's own CRDs (../shared/openshift-4.18/crds, the default feature set) judge every
//! custom resource the bundle writes, offline: what a real API server would prune or refuse is a
//! failure naming the object, the JSON path and what the schema declares. And the example's
//! stand-in CRDs (the project's own writing) declare nothing the real ones do not, and never hide
//! a declared field behind `x-kubernetes-preserve-unknown-fields`.

mod common;

use common::*;
use hardshift_generator::crd::CrdSet;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn release_crds() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/openshift-4.18/crds");
    assert!(d.is_dir(), "{} is missing: ../shared must sit beside the repository", d.display());
    d
}

/// `hardshift verify --crds DIR -o json`: its `crd` checks.
fn crd_checks(dir: &Path, crds: Option<&Path>) -> Vec<Value> {
    let mut args = vec!["verify", "--dir", dir.to_str().unwrap(), "-o", "json"];
    if let Some(c) = crds {
        args.extend(["--crds", c.to_str().unwrap()]);
    }
    let out = hardshift(&args);
    let checks: Vec<Value> =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("verify -o json: {e}\n{}\n{}", text(&out.stdout), text(&out.stderr)));
    checks.into_iter().filter(|c| c["name"] == "crd").collect()
}

/// Every custom resource bootkube applies and `hardshift mco` writes, judged by the real CRDs.
#[test]
fn every_custom_resource_the_bundle_writes_is_valid_against_the_releases_crds() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = hardshift(&["mco", "--dir", d.path().to_str().unwrap()]);
    assert!(out.status.success(), "mco: {}", text(&out.stderr));

    let checks = crd_checks(d.path(), Some(&release_crds()));
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c["status"] != "ok")
        .map(|c| format!("{}: {}", c["subject"], c["detail"]))
        .collect();
    assert!(failed.is_empty(), "the real CRDs refuse or prune:\n{}", failed.join("\n"));
    // Not vacuous: every kind bootkube applies and every file the MCO reads was judged.
    let judged: BTreeSet<String> = checks
        .iter()
        .map(|c| c["subject"].as_str().unwrap().split('/').next().unwrap().to_string())
        .collect();
    for kind in [
        "Infrastructure",
        "Network",
        "DNS",
        "Proxy",
        "FeatureGate",
        "Ingress",
        "Scheduler",
        "ClusterVersion",
        "ImageDigestMirrorSet",
        "MachineConfig",
    ] {
        assert!(judged.contains(kind), "no {kind} was judged: {judged:?}");
    }
    let from_mco = checks
        .iter()
        .filter(|c| c["detail"].as_str().unwrap().starts_with("mco/manifests/"))
        .count();
    assert!(from_mco >= 5, "the MCO's config CRs were not judged: {checks:#?}");
    // And by the CRDs the bundle itself applies (the example's stand-ins), as plain `verify` does.
    let own = crd_checks(d.path(), None);
    let mc = |c: &&Value| c["subject"].as_str().unwrap().starts_with("MachineConfig/");
    assert!(
        own.len() >= 10 && own.iter().filter(|c| !mc(c)).all(|c| c["status"] == "ok"),
        "{own:#?}"
    );
    // The MachineConfigs' CRD comes from the release (the CVO installs it): not judged by the bundle's.
    assert!(own.iter().filter(mc).all(|c| c["status"] == "warn"), "{own:#?}");
    let infra = checks.iter().find(|c| c["subject"] == "Infrastructure/cluster").unwrap();
    assert!(
        infra["detail"].as_str().unwrap().contains("infrastructure-status.json"),
        "the status patch was not judged: {infra}"
    );
}

/// The check can fail: the field name the bundle wrote until this check existed
/// (`apiServerInternalURL`), and a wrong enum, are named with their paths.
#[test]
fn a_pruned_status_field_and_a_bad_enum_are_named() {
    let crds = CrdSet::load_dir(&release_crds()).unwrap();
    let infra: Value = serde_json::json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {"cloudConfig": {"name": ""}, "platformSpec": {"type": "None"}},
        "status": {"apiServerURL": "https://api.x:6443", "apiServerInternalURL": "https://api-int.x:6443",
                   "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "Sometimes",
                   "platform": "None", "platformStatus": {"type": "None"}, "infrastructureName": "x-abcde"}
    });
    let r = crds.check(&infra);
    let got: Vec<String> = r.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        got.iter().any(|p| p.contains(".status.apiServerInternalURL")
            && p.contains("prunes it silently")
            && p.contains("did you mean `apiServerInternalURI`?")),
        "{got:#?}"
    );
    assert!(got.iter().any(|p| p.contains(".status.infrastructureTopology")), "{got:#?}");
    assert_eq!(
        r.crd_file.as_deref(),
        Some("0000_10_config-operator_01_infrastructures-Default.crd.yaml")
    );
}

/// Every stand-in under examples/ocp4/crds declares only fields the real CRD declares, with the
/// same type, and uses `x-kubernetes-preserve-unknown-fields` only where the real schema does.
#[test]
fn the_example_stand_in_crds_declare_nothing_the_real_ones_do_not() {
    let real = CrdSet::load_dir(&release_crds()).unwrap();
    let stand_ins = CrdSet::load_dir(&Path::new(EXAMPLE).join("crds")).unwrap();
    assert!(stand_ins.crds.len() >= 10, "stand-ins: {}", stand_ins.crds.len());
    let mut problems = Vec::new();
    for s in &stand_ins.crds {
        let Some(r) = real.crds.iter().find(|r| r.name == s.name) else {
            problems.push(format!("{}: no real CRD {}", s.file, s.name));
            continue;
        };
        for sv in &s.versions {
            let Some(rv) = r.versions.iter().find(|v| v.name == sv.name) else {
                problems.push(format!("{}: version {} is not served by {}", s.file, sv.name, r.file));
                continue;
            };
            compare(&s.file, &sv.schema, &rv.schema, "", &mut problems);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn compare(file: &str, stand: &Value, real: &Value, path: &str, out: &mut Vec<String>) {
    let preserve = |s: &Value| s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if preserve(stand) && !preserve(real) {
        out.push(format!(
            "{file}: {path}: preserves unknown fields where the real schema declares them"
        ));
    }
    if let (Some(t), Some(rt)) = (stand.get("type"), real.get("type")) {
        if t != rt {
            out.push(format!("{file}: {path}: type {t}, the real schema has {rt}"));
        }
    }
    if let Some(props) = stand.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            match real.get("properties").and_then(|p| p.get(k)) {
                Some(rv) => compare(file, v, rv, &format!("{path}.{k}"), out),
                None => out.push(format!("{file}: {path}.{k}: not declared by the real CRD")),
            }
        }
    }
    if let (Some(i), Some(ri)) = (stand.get("items"), real.get("items")) {
        compare(file, i, ri, &format!("{path}[]"), out);
    }
}

/// The CEL rules of the judged objects that this check cannot evaluate, each with its reason
/// (printed; a rule the parser cannot read at all would mean the evaluator is too weak).
#[test]
fn the_rules_not_evaluated_are_named_with_their_reason() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let crds = CrdSet::load_dir(&release_crds()).unwrap();
    let boot: hardshift_generator::ignition::Config =
        serde_json::from_slice(&std::fs::read(d.path().join("ignition/bootstrap.ign")).unwrap()).unwrap();
    let objs = hardshift_generator::crd::bundle::objects(&boot, &[]).unwrap();
    let (mut checked, mut unchecked) = (0, Vec::new());
    for (_, o) in &objs {
        let r = crds.check(o);
        checked += r.rules_checked;
        unchecked.extend(r.rules_unchecked);
    }
    for u in &unchecked {
        eprintln!("not evaluated: {} {}: `{}`: {}", u.object, u.path, u.rule, u.why);
    }
    eprintln!("{checked} CEL rules evaluated, {} not", unchecked.len());
    assert!(checked > 0, "no CEL rule was evaluated");
    assert!(!unchecked.iter().any(|u| u.why.contains("does not parse")), "{unchecked:#?}");
    // The cost bound is an upper bound: the release's own rules on the bundle's objects are all
    // far below the API server's limit, and must all still run.
    assert!(!unchecked.iter().any(|u| u.why.contains("over budget")), "{unchecked:#?}");
}

/// A rule over the API server's cost budget on an object the bundle applies: the object is not
/// "valid" but a warning that names the rule's place and says "over budget" (before, it was
/// "ok" with only a count of rules not evaluated).
#[test]
fn an_object_under_a_rule_over_budget_is_a_warning_that_says_so() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let crds = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(release_crds()).unwrap().flatten() {
        std::fs::copy(e.path(), crds.path().join(e.file_name())).unwrap();
    }
    let l = format!("[{}]", (1..=30).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    let rule = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.map(d, [a, b, c, d]).size() == 30)))");
    let file = crds.path().join("0000_10_config-operator_01_infrastructures-Default.crd.yaml");
    let script = "import sys,yaml\nf=sys.argv[1]\nd=yaml.safe_load(open(f))\nfor v in d['spec']['versions']:\n    v['schema']['openAPIV3Schema']['properties']['spec']['x-kubernetes-validations']=[{'rule': sys.argv[2], 'message': 'costly'}]\nyaml.safe_dump(d, open(f,'w'))\n";
    let (ok, out) = run("python3", &["-c", script, file.to_str().unwrap(), &rule]);
    assert!(ok, "{out}");
    let checks = crd_checks(d.path(), Some(crds.path()));
    let infra: Vec<&Value> = checks
        .iter()
        .filter(|c| c["subject"].as_str().is_some_and(|s| s.contains("Infrastructure")))
        .collect();
    assert!(!infra.is_empty(), "{checks:#?}");
    for c in infra {
        let detail = c["detail"].as_str().unwrap();
        assert!(c["status"] == "warn" && detail.contains(".spec: not evaluated: over budget"), "{c}");
    }
}
