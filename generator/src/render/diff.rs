//! How the native bundle differs from what the release's renders made: the bootstrap control
//! plane flag by flag (each component's effective flags: its pod's command and arguments, the
//! arguments its rendered config adds, and etcd's `ETCD_*` environment), and the manifests
//! bootkube applies object by object. Pure: both sides are given as parsed objects.

use crate::object::identity;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One side of the comparison.
#[derive(Debug, Default, Clone)]
pub struct Side {
    /// The bootstrap's static pods, by component (`etcd`, `kube-apiserver`, ...).
    pub pods: BTreeMap<String, Value>,
    /// The configs a component reads its arguments from (`apiServerArguments`,
    /// `extendedArguments`), by component.
    pub configs: BTreeMap<String, Value>,
    /// The objects bootkube applies.
    pub objects: Vec<Value>,
}

/// A component's flags that differ.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Flags {
    pub component: String,
    /// Present in the render only: (flag, value).
    pub only_rendered: Vec<(String, String)>,
    /// Present in hardshift's only.
    pub only_native: Vec<(String, String)>,
    /// In both with other values: (flag, hardshift's, the render's).
    pub differ: Vec<(String, String, String)>,
}

/// An object that differs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Changed {
    pub object: String,
    /// The JSON paths whose values differ (values are not shown: Secrets are among them).
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Diff {
    pub flags: Vec<Flags>,
    /// Components one side runs and the other does not.
    pub only_rendered_pods: Vec<String>,
    pub only_native_pods: Vec<String>,
    pub only_rendered: Vec<String>,
    pub only_native: Vec<String>,
    pub changed: Vec<Changed>,
}

impl Diff {
    /// How many differences: what the renders make that hardshift makes otherwise or not at all,
    /// and what hardshift's bootstrap pods run that the renders' do not. The objects hardshift
    /// applies that no render makes (the installer's own part, which hardshift plays) are apart.
    pub fn count(&self) -> usize {
        self.flags
            .iter()
            .map(|f| f.only_rendered.len() + f.only_native.len() + f.differ.len())
            .sum::<usize>()
            + self.only_rendered_pods.len()
            + self.only_native_pods.len()
            + self.only_rendered.len()
            + self.changed.len()
    }
}

/// The component a bootstrap pod runs, from its name (`bootstrap-kube-apiserver`,
/// `etcd-bootstrap-member`, `kube-controller-manager-bootstrap`...).
pub fn component_of(pod_name: &str) -> String {
    for c in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "etcd",
        "cluster-version-operator",
    ] {
        if pod_name.contains(c) {
            return c.to_string();
        }
    }
    pod_name.to_string()
}

/// The component's main container: the one named for it, else the first.
fn main_container<'a>(pod: &'a Value, component: &str) -> Option<&'a Value> {
    let cs = pod["spec"]["containers"].as_array()?;
    let named = |f: &dyn Fn(&str) -> bool| cs.iter().find(|c| c["name"].as_str().is_some_and(f));
    named(&|n| n == component)
        .or_else(|| named(&|n| n.starts_with(&format!("{component}-"))))
        .or(cs.first())
}

/// The effective flags of `component`: `--name=value` (or a bare `--name`) in its main
/// container's command and arguments (shell scripts included), its `ETCD_*` environment, and
/// the `apiServerArguments`/`extendedArguments` of its config. A flag given twice with other
/// values keeps them all, joined by commas, as the programs read lists.
pub fn flags(component: &str, pod: &Value, config: Option<&Value>) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(c) = main_container(pod, component) {
        let words = ["command", "args"]
            .iter()
            .flat_map(|k| c[*k].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .flat_map(str::split_whitespace)
            .map(|w| w.trim_matches(|ch| ch == '"' || ch == '\'' || ch == '\\'));
        for w in words {
            if let Some(f) = w.strip_prefix("--") {
                let (name, value) = f.split_once('=').unwrap_or((f, ""));
                out.entry(name.to_string()).or_default().push(value.to_string());
            }
        }
        for e in c["env"].as_array().into_iter().flatten() {
            let (Some(name), Some(value)) = (e["name"].as_str(), e["value"].as_str()) else {
                continue;
            };
            if let Some(f) = name.strip_prefix("ETCD_").filter(|_| component == "etcd") {
                out.entry(f.to_lowercase().replace('_', "-")).or_default().push(value.to_string());
            }
        }
    }
    for key in ["apiServerArguments", "extendedArguments"] {
        for (name, v) in config.and_then(|c| c[key].as_object()).into_iter().flatten() {
            let values: Vec<String> = v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect();
            out.entry(name.clone()).or_default().push(values.join(","));
        }
    }
    out.into_iter()
        .map(|(k, mut v)| {
            let mut seen = BTreeSet::new();
            v.retain(|x| seen.insert(x.clone()));
            (k, v.join(","))
        })
        .collect()
}

/// The paths at which two objects' contents differ (metadata's annotations and labels aside:
/// they say who made an object, not what it is).
fn paths(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                if at == ".metadata" && (k == "annotations" || k == "labels" || k == "creationTimestamp") {
                    continue;
                }
                let null = Value::Null;
                paths(x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null), &format!("{at}.{k}"), out);
            }
        }
        _ if a != b => out.push(if at.is_empty() { ".".into() } else { at.to_string() }),
        _ => {}
    }
}

/// The whole comparison.
pub fn diff(native: &Side, rendered: &Side) -> Diff {
    let mut d = Diff::default();
    for (component, r_pod) in &rendered.pods {
        let Some(n_pod) = native.pods.get(component) else {
            d.only_rendered_pods.push(component.clone());
            continue;
        };
        let n = flags(component, n_pod, native.configs.get(component));
        let r = flags(component, r_pod, rendered.configs.get(component));
        let f = Flags {
            component: component.clone(),
            only_rendered: r
                .iter()
                .filter(|(k, _)| !n.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            only_native: n
                .iter()
                .filter(|(k, _)| !r.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            differ: n
                .iter()
                .filter_map(|(k, v)| r.get(k).filter(|rv| *rv != v).map(|rv| (k.clone(), v.clone(), rv.clone())))
                .collect(),
        };
        if f != (Flags {
            component: component.clone(),
            ..Default::default()
        }) {
            d.flags.push(f);
        }
    }
    d.only_native_pods = native.pods.keys().filter(|c| !rendered.pods.contains_key(*c)).cloned().collect();
    let by_id = |objs: &[Value]| -> BTreeMap<String, Value> { objs.iter().map(|o| (identity(o), o.clone())).collect() };
    let (n, r) = (by_id(&native.objects), by_id(&rendered.objects));
    d.only_rendered = r.keys().filter(|k| !n.contains_key(*k)).cloned().collect();
    d.only_native = n.keys().filter(|k| !r.contains_key(*k)).cloned().collect();
    for (id, rv) in &r {
        if let Some(nv) = n.get(id) {
            let mut p = Vec::new();
            paths(nv, rv, "", &mut p);
            if !p.is_empty() {
                d.changed.push(Changed {
                    object: id.clone(),
                    paths: p,
                });
            }
        }
    }
    d
}

/// The diff as lines for people.
pub fn lines(d: &Diff) -> Vec<String> {
    let mut out = Vec::new();
    if !d.flags.is_empty() || !d.only_rendered_pods.is_empty() || !d.only_native_pods.is_empty() {
        out.push("the bootstrap control plane, flag by flag (the bundle's static pods against the renders'):".into());
    }
    for f in &d.flags {
        out.push(format!("  {}:", f.component));
        for (k, v) in &f.only_rendered {
            out.push(format!("    + --{k}={v}    (the render's only)"));
        }
        for (k, v) in &f.only_native {
            out.push(format!("    - --{k}={v}    (the bundle's only)"));
        }
        for (k, n, r) in &f.differ {
            out.push(format!("    ~ --{k}: bundle {n} | render {r}"));
        }
    }
    for c in &d.only_rendered_pods {
        out.push(format!("  + {c}: a pod the renders make, hardshift does not"));
    }
    for c in &d.only_native_pods {
        out.push(format!("  - {c}: a pod the bundle runs, the renders do not"));
    }
    if !d.only_rendered.is_empty() || !d.changed.is_empty() {
        out.push("the manifests bootkube applies, object by object:".into());
    }
    for o in &d.only_rendered {
        out.push(format!("  + {o}    (the renders' only)"));
    }
    for c in &d.changed {
        out.push(format!("  ~ {}: {}", c.object, c.paths.join(", ")));
    }
    if !d.only_native.is_empty() {
        out.push("applied by hardshift, made by no render (the installer's own part, which hardshift plays):".into());
        out.extend(d.only_native.iter().map(|o| format!("  = {o}")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_come_from_scripts_arguments_etcd_environment_and_configs() {
        let pod = json!({"spec": {"containers": [
            {"name": "setup", "command": ["/bin/bash"], "args": ["--not-this=1"]},
            {"name": "kube-apiserver", "command": ["/bin/bash", "-ec"],
             "args": ["hyperkube kube-apiserver --openshift-config=/c.yaml --v=2 \\\n --advertise-address=${HOST_IP}"]}]}});
        let config = json!({"apiServerArguments": {"authorization-mode": ["Scope", "RBAC"], "v": ["4"]}});
        let f = flags("kube-apiserver", &pod, Some(&config));
        assert_eq!(f["openshift-config"], "/c.yaml");
        assert_eq!(f["advertise-address"], "${HOST_IP}");
        assert_eq!(f["authorization-mode"], "Scope,RBAC");
        assert_eq!(f["v"], "2,4", "given twice: both values");
        assert!(!f.contains_key("not-this"));
        let etcd = json!({"spec": {"containers": [{"name": "etcdctl", "command": ["etcdctl", "--not-this=1"]}, {"name": "etcd", "command": ["etcd", "--logger=zap", "--logger=zap"],
            "env": [{"name": "ETCD_DATA_DIR", "value": "/var/lib/etcd"}, {"name": "NODE_IP", "value": "x"}]}]}});
        let f = flags("etcd", &etcd, None);
        assert_eq!((f["data-dir"].as_str(), f["logger"].as_str()), ("/var/lib/etcd", "zap"));
        assert!(
            !f.contains_key("node-ip") && !f.contains_key("not-this"),
            "the etcd container, not etcdctl"
        );
    }

    #[test]
    fn objects_are_matched_by_identity_and_their_differences_named_by_path() {
        let secret = |data: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n", "annotations": {"a": data}}, "data": {"tls.crt": data}});
        let native = Side {
            objects: vec![
                secret("SECRET-A"),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mine"}}),
            ],
            ..Default::default()
        };
        let rendered = Side {
            objects: vec![
                secret("SECRET-B"),
                json!({"apiVersion": "security.openshift.io/v1", "kind": "SecurityContextConstraints", "metadata": {"name": "restricted"}}),
            ],
            ..Default::default()
        };
        let d = diff(&native, &rendered);
        assert_eq!(d.only_rendered, ["SecurityContextConstraints.security.openshift.io restricted"]);
        assert_eq!(d.only_native, ["Namespace mine"]);
        assert_eq!(
            d.changed,
            [Changed {
                object: "Secret n/s".into(),
                paths: vec![".data.tls.crt".into()]
            }]
        );
        assert_eq!(d.count(), 2, "what no render makes is apart");
        assert!(
            lines(&d).iter().all(|l| !l.contains("SECRET-")),
            "no value is shown: {:?}",
            lines(&d)
        );
    }

    #[test]
    fn the_same_control_plane_has_no_difference() {
        let pod = json!({"spec": {"containers": [{"name": "kube-scheduler", "args": ["--v=2"]}]}});
        let side = Side {
            pods: [("kube-scheduler".to_string(), pod.clone())].into(),
            ..Default::default()
        };
        assert_eq!(diff(&side, &side).count(), 0);
        let mut other = side.clone();
        other.pods.insert(
            "kube-scheduler".into(),
            json!({"spec": {"containers": [{"name": "kube-scheduler", "args": ["--v=4", "--leader-elect=true"]}]}}),
        );
        let d = diff(&side, &other);
        assert_eq!(d.flags[0].differ, [("v".to_string(), "2".to_string(), "4".to_string())]);
        assert_eq!(d.flags[0].only_rendered, [("leader-elect".to_string(), "true".to_string())]);
    }
}
