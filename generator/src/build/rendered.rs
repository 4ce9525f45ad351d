//! What the renders made, read back from DIR/render/ (`build::render::run` wrote it): their
//! record, the masters' and workers' rendered pools, the control plane `create` gives the
//! bootstrap from them, and the diff against the bundle as written.

use super::render::Rendered;
use super::Error;
use crate::cluster::Cluster;
use crate::fsio;
use crate::render;
use std::path::{Path, PathBuf};

/// How the bundle as written differs from DIR/render/ (made by `run` before): the bootstrap's
/// static pods flag by flag, and the manifests bootkube applies object by object.
pub fn diff(dir: &Path, cluster: &Cluster) -> Result<render::diff::Diff, Error> {
    let assets = dir.join(render::DIR).join("assets");
    if !dir.join(crate::layout::RENDERS_RECORD).is_file() {
        return Err(Error::input(format!(
            "{}: no renders yet\n    hint: run `hardshift render --dir {}` first (the release's images, through podman)",
            dir.join(render::DIR).display(),
            dir.display()
        )));
    }
    let native = written_bootstrap(dir, cluster)?;
    let mut rendered = render::diff::Side::default();
    for f in files(&assets.join("bootstrap-manifests"))
        .into_iter()
        .chain(files(&assets.join("etcd-bootstrap/etc-kubernetes/manifests")))
    {
        for pod in documents(&std::fs::read_to_string(&f).unwrap_or_default()) {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
            rendered.pods.insert(render::diff::component_of(&name), pod);
        }
    }
    for (component, config) in [
        ("kube-apiserver", "kube-apiserver-bootstrap/config"),
        ("kube-controller-manager", "kube-controller-manager-bootstrap/config"),
    ] {
        if let Some(v) = documents(&std::fs::read_to_string(assets.join(config)).unwrap_or_default())
            .into_iter()
            .next()
        {
            rendered.configs.insert(component.to_string(), v);
        }
    }
    for step in render::steps(cluster).map_err(Error::input)? {
        for c in step.then.iter().filter(|c| c.to == "manifests" && c.from != "manifests") {
            for f in files(&assets.join(&c.from)) {
                rendered.objects.extend(documents(&std::fs::read_to_string(&f).unwrap_or_default()));
            }
        }
    }
    Ok(render::diff::diff(&native, &rendered))
}

/// The bootstrap node as the live bundle's Ignition config has it: its static pods, the configs
/// they read, and what bootkube applies.
fn written_bootstrap(dir: &Path, cluster: &Cluster) -> Result<render::diff::Side, Error> {
    let node = cluster
        .nodes
        .iter()
        .find(|n| n.role == crate::cluster::Role::Bootstrap)
        .ok_or_else(|| Error::input("the inventory has no bootstrap node"))?;
    let path = crate::layout::ignition(&node.hostname);
    let bytes = fsio::read_current(dir, &path).ok_or_else(|| {
        Error::input(format!(
            "{}: no bundle yet\n    hint: run `hardshift create --dir {}` first",
            dir.join(&path).display(),
            dir.display()
        ))
    })?;
    let cfg: crate::ignition::Config = serde_json::from_slice(&bytes).map_err(|e| Error::other(format!("{path}: {e}")))?;
    let mut side = render::diff::Side::default();
    let asset = |d: &str| format!("{}/{d}/", crate::assets::paths::ASSET_DIR);
    let applied = [asset("manifests"), asset(crate::assets::paths::AFTER_CVO), asset("crds")];
    for f in &cfg.storage.files {
        let Some(bytes) = f.contents.as_ref().and_then(crate::ignition::decode) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        if f.path.starts_with(&format!("{}/", crate::assets::paths::STATIC_PODS)) {
            for pod in documents(&text) {
                let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
                side.pods.insert(render::diff::component_of(&name), pod);
            }
        } else if let Some(name) = f.path.strip_prefix(&format!("{}/", crate::assets::paths::BOOTSTRAP_CONFIGS)) {
            if let Some(v) = documents(&text).into_iter().next() {
                side.configs.insert(name.trim_end_matches("-config.yaml").to_string(), v);
            }
        } else if applied.iter().any(|d| f.path.starts_with(d.as_str())) {
            side.objects.extend(documents(&text));
        }
    }
    Ok(side)
}

/// What the renders made for the bootstrap node, read from DIR/render/assets (see
/// `render::bootstrap`). Every piece bootkube.sh would copy must be there.
pub fn read_bootstrap(dir: &Path, cluster: &Cluster) -> Result<render::bootstrap::Bootstrap, Error> {
    let assets = dir.join(render::DIR).join("assets");
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| {
            Error::input(format!(
                "{}: {e} (run `hardshift render --dir {}` again)",
                p.display(),
                dir.display()
            ))
        })
    };
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut b = render::bootstrap::Bootstrap::default();
    for p in files(&assets.join("bootstrap-manifests"))
        .into_iter()
        .chain(files(&assets.join("etcd-bootstrap/etc-kubernetes/manifests")))
    {
        b.pods.push((name(&p), read(&p)?));
    }
    for (from, to) in [
        ("kube-apiserver-bootstrap/config", "kube-apiserver-config.yaml"),
        ("kube-controller-manager-bootstrap/config", "kube-controller-manager-config.yaml"),
        (
            "kube-controller-manager-bootstrap/cpc-config",
            "cluster-policy-controller-config.yaml",
        ),
        ("kube-scheduler-bootstrap/config", "kube-scheduler-config.yaml"),
    ] {
        b.configs.push((to.to_string(), read(&assets.join(from))?));
    }
    for p in files(&assets.join("tls")) {
        b.secrets.push((name(&p), read(&p)?));
    }
    b.secrets
        .push(("kubeconfig".into(), read(&assets.join("auth/kubeconfig-loopback"))?));
    let resources = assets.join("etcd-bootstrap/etc-kubernetes/static-pod-resources");
    let mut stack = vec![resources.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&resources).unwrap_or(&p).to_string_lossy().to_string();
                b.resources.push((rel, read(&p)?));
            }
        }
    }
    b.resources.sort();
    for step in render::steps(cluster).map_err(Error::input)? {
        for c in step.then.iter().filter(|c| c.to == "manifests" && c.from != "manifests") {
            for p in files(&assets.join(&c.from)) {
                let bytes = read(&p)?;
                let objects = documents(&String::from_utf8_lossy(&bytes));
                b.objects.extend(objects.iter().map(render::diff::identity));
                if objects.iter().any(|o| o["kind"] == "CustomResourceDefinition") {
                    b.crds.push((name(&p), bytes));
                } else {
                    b.manifests.push((name(&p), bytes));
                }
            }
        }
    }
    let missing: Vec<&str> = [
        "kube-apiserver-pod.yaml",
        "kube-controller-manager-pod.yaml",
        "kube-scheduler-pod.yaml",
        "etcd-member-pod.yaml",
    ]
    .into_iter()
    .filter(|p| !b.pods.iter().any(|(n, _)| n == p))
    .collect();
    if !missing.is_empty() || b.resources.is_empty() {
        return Err(Error::input(format!(
            "{}: the renders made no {}: run `hardshift render --dir {}` again",
            assets.display(),
            if missing.is_empty() {
                "etcd static-pod resources".to_string()
            } else {
                missing.join(", ")
            },
            dir.display()
        )));
    }
    Ok(b)
}

/// The regular files of a directory, by name.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// The YAML documents of a text (`---` between them), each parsed; what does not parse is left out.
fn documents(text: &str) -> Vec<serde_json::Value> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else {
            let last = docs.last_mut().expect("one");
            last.push_str(line);
            last.push('\n');
        }
    }
    docs.iter()
        .filter(|d| !d.trim().is_empty())
        .filter_map(|d| crate::config::yaml::parse(d).ok())
        .map(|d| d.value)
        .filter(|v| v.is_object())
        .collect()
}

/// What DIR/render/renders.json records, if there is one that reads.
pub fn recorded(dir: &Path) -> Option<Rendered> {
    serde_json::from_slice(&std::fs::read(dir.join(crate::layout::RENDERS_RECORD)).ok()?).ok()
}

/// The rendered MachineConfig of a pool (`rendered-<pool>-*.yaml`), if the renders made one.
pub fn rendered_pool(dir: &Path, pool: &str) -> Option<PathBuf> {
    files(&dir.join(render::DIR).join("assets/mcc-output/machine-configs"))
        .into_iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("rendered-{pool}-")))
        })
}

/// Where the renders' outputs are, once `render` ran.
pub fn rendered_dir(dir: &Path) -> PathBuf {
    dir.join(render::DIR)
}
