//! The release's image references: which image runs etcd, the API server, the pause container...
//!
//! Two forms are read: the ImageStream JSON found at `/release-manifests/image-references` in a
//! release image, and a `name=pullspec` (or `name pullspec`, as `oc adm release info --pullspecs`
//! prints) list. The release image itself (the CVO's image) is not among the references: it comes
//! from `hardshift.yaml` `release.image`, or a `release`/`cluster-version-operator` entry in a list.

use serde::Serialize;
use std::collections::BTreeMap;

/// The OpenShift minor this hardshift writes bundles for (its feature gates, CRDs and renders are
/// that release's), and the Kubernetes minor inside it.
pub const TARGET_OPENSHIFT: &str = "4.18";
pub const TARGET_KUBERNETES: &str = "1.31";

/// Tags the bundle uses, and why.
pub const REQUIRED: &[(&str, &str)] = &[
    ("etcd", "the etcd static pod"),
    ("hyperkube", "kube-apiserver, kube-controller-manager and kube-scheduler"),
    ("pod", "CRI-O's pause image"),
];

/// Tags the machine-config-operator's bootstrap stops without (`findImageOrDie` in its
/// `cmd/machine-config-operator/bootstrap.go`), and what each runs; then the two whose absence
/// leaves the rendered configs without an OS image (`osImageURL` empty: no pivot).
pub const MCO_REQUIRED: &[(&str, &str)] = &[
    ("machine-config-operator", "the MCO itself"),
    ("keepalived-ipfailover", "keepalived (the VIPs of on-premise platforms)"),
    ("coredns", "the nodes' coredns static pods"),
    ("baremetal-runtimecfg", "the on-premise runtime config"),
    ("oauth-proxy", "the MCO's metrics proxy"),
    ("kube-rbac-proxy", "the MCO's metrics proxy"),
    ("pod", "the infra (pause) image"),
    ("haproxy-router", "the on-premise API load balancer"),
    ("rhel-coreos", "osImageURL: the OS the nodes pivot to"),
    ("rhel-coreos-extensions", "the OS extensions image"),
];

/// One line per MCO-required tag the release lacks: which, and what needs it.
pub fn missing_for_mco(r: &Release) -> Vec<String> {
    MCO_REQUIRED
        .iter()
        .filter(|(t, _)| !r.tags.contains_key(*t))
        .map(|(t, why)| format!("the release has no {t:?} image: the machine-config-operator's bootstrap needs it ({why})"))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Release {
    /// The release image pullspec: what the cluster-version-operator runs.
    pub image: String,
    /// The version, when the ImageStream names it.
    pub version: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// The Kubernetes version the release ships, as its hyperkube image names it
    /// (`io.openshift.build.versions: kubernetes=1.31.6`): what `oc adm release info` shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}

impl Release {
    /// The pullspec of a tag the validation guaranteed.
    pub fn tag(&self, name: &str) -> &str {
        self.tags
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("validated release lacks {name}"))
    }
}

/// Parse references; `Err` holds (line, message) pairs.
pub fn parse(text: &str, release_image: Option<&str>) -> Result<Release, Vec<(usize, String)>> {
    let mut errors = Vec::new();
    let (mut tags, version, kubernetes) = if text.trim_start().starts_with('{') {
        match image_stream(text) {
            Ok(v) => v,
            Err(e) => return Err(vec![e]),
        }
    } else {
        (pullspec_list(text, &mut errors), None, None)
    };
    for (tag, pullspec) in &tags {
        if !pullspec.contains('/') {
            errors.push((0, format!("tag {tag:?}: {pullspec:?} is not an image pullspec")));
        }
    }
    for (tag, why) in REQUIRED {
        if !tags.contains_key(*tag) {
            errors.push((0, format!("the release has no {tag:?} image (needed for {why})")));
        }
    }
    let listed = tags.remove("release").or_else(|| tags.get("cluster-version-operator").cloned());
    let image = release_image.map(String::from).or(listed);
    if image.is_none() {
        errors.push((
            0,
            "the release image itself is unknown (the cluster-version-operator runs it)".into(),
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Release {
        image: image.unwrap_or_default(),
        version,
        tags,
        kubernetes,
    })
}

/// Tags, the version and the Kubernetes version an ImageStream names; or (line, message).
type Parsed = (BTreeMap<String, String>, Option<String>, Option<String>);

fn image_stream(text: &str) -> Result<Parsed, (usize, String)> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| (e.line(), format!("not valid JSON: {e}")))?;
    if v["kind"] != "ImageStream" {
        return Err((1, format!("expected kind ImageStream, found {}", v["kind"])));
    }
    let mut tags = BTreeMap::new();
    let mut kubernetes = None;
    for t in v["spec"]["tags"].as_array().into_iter().flatten() {
        if let (Some(name), Some(from)) = (t["name"].as_str(), t["from"]["name"].as_str()) {
            tags.insert(name.to_string(), from.to_string());
        }
        if t["name"] == "hyperkube" {
            let versions = t["annotations"]["io.openshift.build.versions"].as_str().unwrap_or_default();
            kubernetes = versions
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("kubernetes="))
                .map(String::from);
        }
    }
    Ok((tags, v["metadata"]["name"].as_str().map(String::from), kubernetes))
}

fn pullspec_list(text: &str, errors: &mut Vec<(usize, String)>) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let pair = line.split_once('=').or_else(|| line.split_once(char::is_whitespace));
        match pair {
            Some((name, spec)) if !name.trim().is_empty() && !spec.trim().is_empty() => {
                tags.insert(name.trim().to_string(), spec.trim().to_string());
            }
            _ => errors.push((i + 1, format!("expected `name=pullspec`, found {line:?}"))),
        }
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "etcd=quay.io/r@sha256:1\nhyperkube quay.io/r@sha256:2\npod=quay.io/r@sha256:3\nkube-proxy=quay.io/r@sha256:4\n";

    #[test]
    fn list_with_release_image() {
        let r = parse(LIST, Some("quay.io/rel:4.18")).unwrap();
        assert_eq!(r.tag("hyperkube"), "quay.io/r@sha256:2");
        assert_eq!(r.image, "quay.io/rel:4.18");
    }

    #[test]
    fn missing_tag_is_named() {
        let e = parse("etcd=quay.io/x@sha256:1\n", Some("quay.io/rel")).unwrap_err();
        assert!(e.iter().any(|(_, m)| m.contains("\"hyperkube\"")), "{e:?}");
    }

    #[test]
    fn release_image_is_required() {
        let e = parse(LIST, None).unwrap_err();
        assert!(e.iter().any(|(_, m)| m.contains("release image itself")), "{e:?}");
    }
}
