//! What of a bundle the CRDs judge: every object bootkube applies from the bootstrap's
//! `/opt/openshift/manifests/` (the Infrastructure and FeatureGate with the status bootkube patches onto them), the
//! CRDs it applies first (`/opt/openshift/crds/`), and the config CRs `hardshift mco` gives the
//! machine-config-operator (`mco/manifests/`, read by the caller: they sit beside the bundle).

use super::CrdError;
use crate::assets::paths::{AFTER_CVO, ASSET_DIR};
use crate::bundle::Bundle;
use crate::ignition::{self, Config};
use serde_json::Value;

/// (where it came from, object), in apply order.
pub type Objects = Vec<(String, Value)>;

fn yaml_objects(place: &str, bytes: &[u8], out: &mut Objects) -> Result<(), CrdError> {
    let text = std::str::from_utf8(bytes).map_err(|e| CrdError::Malformed {
        place: place.to_string(),
        message: e.to_string(),
    })?;
    for (i, d) in super::split_documents(text).into_iter().enumerate() {
        let doc = crate::config::yaml::parse(d).map_err(|e| CrdError::Yaml {
            place: place.to_string(),
            document: i + 1,
            line: e.pos.line,
            message: e.message,
        })?;
        out.push((place.to_string(), doc.value));
    }
    Ok(())
}

/// The bootstrap config's files under `dir`, in name order: (path, bytes).
fn files_under(cfg: &Config, dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = cfg
        .storage
        .files
        .iter()
        .filter(|f| f.path.strip_prefix(dir).is_some_and(|r| !r.contains('/')))
        .filter_map(|f| Some((f.path.clone(), ignition::decode(f.contents.as_ref()?)?)))
        .collect();
    out.sort();
    out
}

/// The CRDs bootkube applies, as (path, document).
pub fn applied_crds(bootstrap: &Config) -> Result<Objects, CrdError> {
    let mut out = Vec::new();
    for (p, bytes) in files_under(bootstrap, &format!("{ASSET_DIR}/crds/")) {
        yaml_objects(&p, &bytes, &mut out)?;
    }
    Ok(out)
}

/// Every custom-resource candidate the bundle writes (built-in kinds included: the check skips
/// them), the Infrastructure and FeatureGate status patches merged into their objects.
pub fn objects(bootstrap: &Config, mco_manifests: &[(String, Vec<u8>)]) -> Result<Objects, CrdError> {
    let mut out = Vec::new();
    for dir in ["manifests", AFTER_CVO] {
        for (p, bytes) in files_under(bootstrap, &format!("{ASSET_DIR}/{dir}/")) {
            if p.ends_with(".yaml") || p.ends_with(".yml") {
                yaml_objects(&p, &bytes, &mut out)?;
            }
        }
    }
    let top = files_under(bootstrap, &format!("{ASSET_DIR}/"));
    for (file, kind) in [
        ("infrastructure-status.json", "Infrastructure"),
        ("featuregate-status.json", "FeatureGate"),
        ("ingress-status.json", "Ingress"),
    ] {
        let status_path = format!("{ASSET_DIR}/{file}");
        let Some((_, bytes)) = top.iter().find(|(p, _)| *p == status_path) else {
            continue;
        };
        let patch: Value = serde_json::from_slice(bytes).map_err(|e| CrdError::Malformed {
            place: status_path.clone(),
            message: e.to_string(),
        })?;
        match out
            .iter_mut()
            .find(|(_, o)| o["kind"] == kind && o["metadata"]["name"] == "cluster")
        {
            Some((place, obj)) => {
                obj["status"] = patch["status"].clone();
                *place = format!("{place} + {status_path}");
            }
            None => {
                return Err(CrdError::Malformed {
                    place: status_path,
                    message: format!("patches a {kind} no manifest creates"),
                })
            }
        }
    }
    for (path, bytes) in mco_manifests {
        yaml_objects(path, bytes, &mut out)?;
    }
    Ok(out)
}

/// What `verify` reports: one check per custom resource, judged by `crds` (`source` names them).
pub fn checks(
    c: &crate::cluster::Cluster,
    b: &Bundle,
    mco_manifests: &[(String, Vec<u8>)],
    crds: Option<&super::CrdSet>,
    source: &str,
) -> Vec<crate::verify::Check> {
    use crate::verify::{Check, Status};
    let check = |subject: String, status: Status, detail: String| Check {
        name: "crd".into(),
        subject,
        issuer: String::new(),
        expires: String::new(),
        status,
        detail,
    };
    let path = format!("ignition/{}.ign", c.bootstrap().hostname);
    let parsed = b
        .files
        .get(&path)
        .ok_or_else(|| format!("{path} is missing"))
        .and_then(|f| serde_json::from_slice::<Config>(&f.contents.bytes()).map_err(|e| format!("{path}: {e}")));
    let boot = match parsed {
        Ok(cfg) => cfg,
        Err(e) => return vec![check(String::new(), Status::Fail, e)],
    };
    let own;
    let crds = match crds {
        Some(s) => s,
        None => match applied_crds(&boot).and_then(super::CrdSet::select) {
            Ok(s) => {
                own = s;
                &own
            }
            Err(e) => return vec![check(String::new(), Status::Fail, format!("the bundle's CRDs: {e}"))],
        },
    };
    let objs = match objects(&boot, mco_manifests) {
        Ok(o) => o,
        Err(e) => return vec![check(String::new(), Status::Fail, e.to_string())],
    };
    let mut out = Vec::new();
    for (place, obj) in &objs {
        let r = crds.check(obj);
        let Some(file) = r.crd_file.clone().or_else(|| (!r.problems.is_empty()).then(String::new)) else {
            continue;
        };
        let subject = super::object_name(obj);
        // Applied after the CVO installs the release's CRDs (and their copies among the MCO
        // render's inputs): the bundle's own (the bootstrap's crds/) need not hold its CRD; the
        // release's (`--crds`) do.
        let after_cvo = place.contains(&format!("/{AFTER_CVO}/")) || place.starts_with(crate::mco::AFTER_CVO_INPUTS);
        if r.crd_file.is_none() && after_cvo {
            let detail = format!(
                "{place}: not judged: {source} hold no CRD for it (the cluster-version-operator installs it from the release); judge it with `verify --crds DIR` holding the release's CRDs"
            );
            out.push(check(subject, Status::Warn, detail));
            continue;
        }
        let unchecked = match r.rules_unchecked.len() {
            0 => String::new(),
            n => format!(", {n} not evaluated here"),
        };
        // A rule over the cost budget is one the API server stops too (the object refused): said
        // with its place and why, never passed as "valid".
        let over: Vec<String> = r
            .rules_unchecked
            .iter()
            .filter(|u| u.why.contains("over budget"))
            .map(|u| format!("{}: {}", u.path, u.why))
            .collect();
        if r.problems.is_empty() && !over.is_empty() {
            let detail = format!(
                "{place}: against {source}/{file}: {} CEL rules checked, and {}",
                r.rules_checked,
                over.join("; ")
            );
            out.push(check(subject, Status::Warn, detail));
        } else if r.problems.is_empty() {
            let detail = format!(
                "{place}: valid against {source}/{file} ({} CEL rules checked{unchecked})",
                r.rules_checked
            );
            out.push(check(subject, Status::Ok, detail));
        } else {
            let problems: Vec<String> = r.problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
            out.push(check(subject, Status::Fail, format!("{place}: {}", problems.join("; "))));
        }
    }
    out
}
