//! What the renders made, read back from DIR/render/ (`pipeline::render::run` wrote it): their
//! record, the masters' and workers' rendered pools, the control plane `create` gives the
//! bootstrap from them, and the diff against the bundle as written. DIR/render is read once, as
//! data (`outputs::read_all`: no link followed, nothing but files and directories), and
//! everything here works from that copy.

use super::error::Error;
use super::outputs;
use super::render::{Rendered, RECORD};
use crate::cluster::Cluster;
use crate::fsio;
use crate::render;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// DIR/render as read: the renders' record and every file, by path under DIR/render.
#[derive(Debug, Clone)]
pub struct Renders {
    pub record: Rendered,
    pub files: BTreeMap<String, Vec<u8>>,
}

/// The renders in DIR/render, if `render` made some (its record is there). Refused, naming the
/// entry, when DIR/render holds a link, a FIFO, a device or a second name for a file, or when
/// its record does not read; nothing else is read then.
pub fn load(dir: &Path) -> Result<Option<Renders>, Error> {
    let root = dir.join(render::DIR);
    if std::fs::symlink_metadata(&root).is_err() {
        return Ok(None);
    }
    let again = format!(
        "run `hardshift render --dir {}` again, or remove {} to build without the renders",
        dir.display(),
        root.display()
    );
    let files = outputs::read_all(&root).map_err(|e| {
        let m = format!("{}\n    hint: {again}", e.at(&root));
        match e {
            outputs::TreeError::Refused { .. } => Error::input(m),
            outputs::TreeError::Io { .. } => Error::other(m),
        }
    })?;
    let Some(json) = files.get(RECORD) else {
        return Ok(None);
    };
    let record = parse_record(json).map_err(|e| {
        Error::input(format!(
            "{}: {e}\n    hint: {again}",
            dir.join(crate::layout::RENDERS_RECORD).display()
        ))
    })?;
    Ok(Some(Renders { record, files }))
}

/// Whether DIR/render holds a record of renders (not read: `load` reads it).
pub fn has_renders(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(crate::layout::RENDERS_RECORD)).is_ok()
}

/// The renders' record from its bytes; the error says where it stops reading (line, column).
pub fn parse_record(bytes: &[u8]) -> Result<Rendered, NotARecord> {
    serde_json::from_slice(bytes).map_err(NotARecord)
}

/// Bytes that are not the renders' record (serde's error says where it stops reading).
#[derive(Debug, thiserror::Error)]
#[error("not the renders' record as `hardshift render` writes it: {0}")]
pub struct NotARecord(#[source] pub serde_json::Error);

impl Renders {
    /// A file under DIR/render/assets.
    fn asset(&self, path: &str) -> Option<&[u8]> {
        self.files.get(&format!("assets/{path}")).map(Vec::as_slice)
    }

    /// Every file under DIR/render/assets/`sub`, by path under it.
    fn under(&self, sub: &str) -> Vec<(&str, &[u8])> {
        let prefix = format!("assets/{sub}/");
        self.files
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, b)| (&p[prefix.len()..], b.as_slice()))
            .collect()
    }

    /// The files directly in DIR/render/assets/`sub`, by name.
    fn files(&self, sub: &str) -> Vec<(&str, &[u8])> {
        self.under(sub).into_iter().filter(|(n, _)| !n.contains('/')).collect()
    }
}

/// How the bundle as written differs from DIR/render/ (made by `run` before): the bootstrap's
/// static pods flag by flag, and the manifests bootkube applies object by object.
pub fn diff(dir: &Path, cluster: &Cluster) -> Result<render::diff::Diff, Error> {
    let Some(renders) = load(dir)? else {
        return Err(Error::input(format!(
            "{}: no renders yet\n    hint: run `hardshift render --dir {}` first (the release's images, through podman)",
            dir.join(render::DIR).display(),
            dir.display()
        )));
    };
    let native = written_bootstrap(dir, cluster)?;
    let mut rendered = render::diff::Side::default();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    for (_, bytes) in renders
        .files("bootstrap-manifests")
        .into_iter()
        .chain(renders.files("etcd-bootstrap/etc-kubernetes/manifests"))
    {
        for pod in documents(&text(bytes)) {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
            rendered.pods.insert(render::diff::component_of(&name), pod);
        }
    }
    for (component, config) in [
        ("kube-apiserver", "kube-apiserver-bootstrap/config"),
        ("kube-controller-manager", "kube-controller-manager-bootstrap/config"),
    ] {
        if let Some(v) = documents(&text(renders.asset(config).unwrap_or_default())).into_iter().next() {
            rendered.configs.insert(component.to_string(), v);
        }
    }
    for step in render::steps(cluster).map_err(Error::input)? {
        for c in step.then.iter().filter(|c| c.to == "manifests" && c.from != "manifests") {
            for (_, bytes) in renders.files(&c.from) {
                rendered.objects.extend(documents(&text(bytes)));
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
        .or(cluster.single_node().then(|| cluster.bootstrap()))
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

/// What the renders made for the bootstrap node, from DIR/render/assets (see
/// `assets::control_plane`). Every piece bootkube.sh would copy must be there.
pub fn read_bootstrap(dir: &Path, renders: &Renders, cluster: &Cluster) -> Result<crate::assets::control_plane::Bootstrap, Error> {
    let assets = dir.join(render::DIR).join("assets");
    let read = |p: &str| {
        renders.asset(p).map(<[u8]>::to_vec).ok_or_else(|| {
            Error::input(format!(
                "{}: not made by the renders (run `hardshift render --dir {}` again)",
                assets.join(p).display(),
                dir.display()
            ))
        })
    };
    let owned = |v: Vec<(&str, &[u8])>| v.into_iter().map(|(n, b)| (n.to_string(), b.to_vec())).collect::<Vec<_>>();
    let mut b = crate::assets::control_plane::Bootstrap {
        pods: owned(renders.files("bootstrap-manifests")),
        secrets: owned(renders.files("tls")),
        resources: owned(renders.under("etcd-bootstrap/etc-kubernetes/static-pod-resources")),
        ..Default::default()
    };
    b.pods.extend(owned(renders.files("etcd-bootstrap/etc-kubernetes/manifests")));
    for (from, to) in [
        ("kube-apiserver-bootstrap/config", "kube-apiserver-config.yaml"),
        ("kube-controller-manager-bootstrap/config", "kube-controller-manager-config.yaml"),
        (
            "kube-controller-manager-bootstrap/cpc-config",
            "cluster-policy-controller-config.yaml",
        ),
        ("kube-scheduler-bootstrap/config", "kube-scheduler-config.yaml"),
    ] {
        b.configs.push((to.to_string(), read(from)?));
    }
    b.secrets.push(("kubeconfig".into(), read("auth/kubeconfig-loopback")?));
    b.resources.sort();
    for step in render::steps(cluster).map_err(Error::input)? {
        for c in step.then.iter().filter(|c| c.to == "manifests" && c.from != "manifests") {
            for (name, bytes) in renders.files(&c.from) {
                let objects = documents(&String::from_utf8_lossy(bytes));
                b.objects.extend(objects.iter().map(crate::object::identity));
                if objects.iter().any(|o| o["kind"] == "CustomResourceDefinition") {
                    b.crds.push((name.to_string(), bytes.to_vec()));
                } else {
                    b.manifests.push((name.to_string(), bytes.to_vec()));
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

/// The YAML documents of a text (`---` between them), each parsed; what does not parse is left out.
pub fn documents(text: &str) -> Vec<serde_json::Value> {
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

/// The rendered MachineConfig of a pool (`rendered-<pool>-*.yaml`), if the renders made one.
pub fn rendered_pool(dir: &Path, renders: &Renders, pool: &str) -> Option<PathBuf> {
    let sub = "mcc-output/machine-configs";
    renders
        .files(sub)
        .into_iter()
        .find(|(n, _)| n.starts_with(&format!("rendered-{pool}-")))
        .map(|(n, _)| dir.join(render::DIR).join("assets").join(sub).join(n))
}

/// Where the renders' outputs are, once `render` ran.
pub fn rendered_dir(dir: &Path) -> PathBuf {
    dir.join(render::DIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DIR/render as `render` leaves it: a record and one rendered file.
    fn renders() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().join(render::DIR);
        std::fs::create_dir_all(r.join("assets/tls")).unwrap();
        std::fs::write(r.join("assets/tls/a.crt"), "A").unwrap();
        let record = Rendered {
            release: "r".into(),
            version: "4.18.0".into(),
            kubernetes: "1.31.5".into(),
            steps: Vec::new(),
            layout: BTreeMap::new(),
            outputs: None,
        };
        std::fs::write(r.join(RECORD), serde_json::to_vec(&record).unwrap()).unwrap();
        d
    }

    #[test]
    fn create_reads_the_renders_as_data() {
        let d = renders();
        let got = load(d.path()).unwrap().unwrap();
        assert_eq!(got.files("tls"), [("a.crt", &b"A"[..])]);
        assert!(load(tempfile::tempdir().unwrap().path()).unwrap().is_none(), "no renders");
    }

    #[test]
    fn a_link_planted_after_the_render_is_refused_by_name() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "HOST").unwrap();
        let d = renders();
        let tls = d.path().join("render/assets/tls");
        std::os::unix::fs::symlink(outside.path().join("secret"), tls.join("planted.crt")).unwrap();
        let Err(Error::Input(m)) = load(d.path()) else {
            panic!("a planted link must be refused as bad input")
        };
        assert!(
            m.contains(&format!(
                "{}: a symbolic link (to {})",
                tls.join("planted.crt").display(),
                outside.path().join("secret").display()
            )),
            "{m}"
        );
        // DIR/render itself a link to renders elsewhere.
        let other = renders();
        let e = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(other.path().join("render"), e.path().join("render")).unwrap();
        let Err(Error::Input(m)) = load(e.path()) else {
            panic!("DIR/render a link")
        };
        assert!(m.contains("render: a symbolic link"), "{m}");
    }

    #[test]
    fn a_corrupt_record_is_named_where_it_stops_reading() {
        let d = renders();
        std::fs::write(d.path().join("render/renders.json"), "{\"release\": 1}").unwrap();
        let Err(Error::Input(m)) = load(d.path()) else {
            panic!("a corrupt record must be refused")
        };
        assert!(m.contains("render/renders.json: ") && m.contains("line 1 column"), "{m}");
        assert!(m.contains("hardshift render --dir"), "{m}");
    }
}
