//! `hardshift-agent in-place-config`: a single node's master config, made on its live system once
//! bootkube is done (hardshift's step in place of the installer's `cluster-bootstrap
//! bootstrap-in-place`). The config `create` wrote for the master (`--base`) takes what only the
//! live system holds (`--carry SRC=DEST`): etcd's data, the bootstrap control plane's pods,
//! secrets and configs, and the agent itself. Each file keeps its mode and goes in gzip-compressed
//! in a data URL; each directory keeps its mode. The result is written 0600 (it holds keys),
//! through a temporary file and a rename, so `coreos-installer` never reads half a config.

use base64::Engine;
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A file or directory to place on the installed system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File { path: String, mode: u32, contents: Vec<u8> },
    Dir { path: String, mode: u32 },
}

/// What `--carry SRC=DEST` names (`SRC` alone: the same path on the installed system).
pub fn parse_carry(arg: &str) -> Result<(PathBuf, String), String> {
    let (src, dest) = arg.split_once('=').unwrap_or((arg, arg));
    if !src.starts_with('/') || !dest.starts_with('/') {
        return Err(format!("--carry {arg:?}: SRC and DEST must be absolute paths"));
    }
    Ok((PathBuf::from(src), dest.trim_end_matches('/').to_string()))
}

/// Everything under `src` (a file or a directory, walked without following links), placed at
/// `dest`. A missing source is an error: the config would lack what the master needs.
pub fn collect(src: &Path, dest: &str) -> Result<Vec<Entry>, String> {
    let meta = std::fs::symlink_metadata(src).map_err(|e| format!("{}: {e}", src.display()))?;
    let mode = meta.permissions().mode() & 0o7777;
    if meta.is_file() {
        let contents = std::fs::read(src).map_err(|e| format!("{}: {e}", src.display()))?;
        return Ok(vec![Entry::File {
            path: dest.to_string(),
            mode,
            contents,
        }]);
    }
    if !meta.is_dir() {
        return Err(format!(
            "{}: neither a file nor a directory (mode {:o})",
            src.display(),
            meta.mode()
        ));
    }
    let mut out = vec![Entry::Dir {
        path: dest.to_string(),
        mode,
    }];
    let mut names: Vec<PathBuf> = std::fs::read_dir(src)
        .map_err(|e| format!("{}: {e}", src.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", src.display()))?;
    names.sort();
    for p in names {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let ft = std::fs::symlink_metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        // Sockets, fifos and links are the running system's, not state to install.
        if ft.is_file() || ft.is_dir() {
            out.extend(collect(&p, &format!("{dest}/{name}"))?);
        }
    }
    Ok(out)
}

/// A data URL Ignition reads: gzip-compressed when that is smaller.
fn contents(data: &[u8]) -> Value {
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let zipped = gz.write_all(data).and_then(|_| gz.finish()).ok();
    match zipped {
        Some(z) if z.len() < data.len() => json!({"source": format!("data:;base64,{}", b64(&z)), "compression": "gzip"}),
        _ => json!({"source": format!("data:;base64,{}", b64(data))}),
    }
}

/// `base` with `entries` in it: each replaces the base's entry of the same path (Ignition refuses
/// two). Pure: the I/O is the caller's.
pub fn merge(mut base: Value, entries: &[Entry]) -> Result<Value, String> {
    if base["ignition"]["version"].as_str().is_none() {
        return Err("the base is not an Ignition config (no ignition.version)".into());
    }
    let paths: std::collections::BTreeSet<&str> = entries
        .iter()
        .map(|e| match e {
            Entry::File { path, .. } | Entry::Dir { path, .. } => path.as_str(),
        })
        .collect();
    let storage = base
        .as_object_mut()
        .ok_or("the base is not a JSON object")?
        .entry("storage")
        .or_insert_with(|| json!({}));
    for key in ["files", "directories", "links"] {
        if let Some(list) = storage.get_mut(key).and_then(Value::as_array_mut) {
            list.retain(|e| !e["path"].as_str().is_some_and(|p| paths.contains(p)));
        }
    }
    let (mut files, mut dirs) = (vec![], vec![]);
    for e in entries {
        match e {
            Entry::File { path, mode, contents: c } => {
                files.push(json!({"path": path, "mode": mode, "overwrite": true, "contents": contents(c)}))
            }
            Entry::Dir { path, mode } => dirs.push(json!({"path": path, "mode": mode, "overwrite": true})),
        }
    }
    for (key, more) in [("files", files), ("directories", dirs)] {
        let list = storage
            .as_object_mut()
            .ok_or("storage is not an object")?
            .entry(key)
            .or_insert_with(|| json!([]));
        list.as_array_mut().ok_or(format!("storage.{key} is not a list"))?.extend(more);
    }
    Ok(base)
}

/// The command: read, carry, merge, write (0600, atomically). Prints what it carried.
pub fn run(base: &Path, carry: &[String], output: &Path) -> Result<String, String> {
    let text = std::fs::read(base).map_err(|e| format!("{}: {e}", base.display()))?;
    let base_cfg: Value = serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", base.display()))?;
    let mut entries = vec![];
    let mut summary = vec![];
    for arg in carry {
        let (src, dest) = parse_carry(arg)?;
        let got = collect(&src, &dest)?;
        let bytes: usize = got
            .iter()
            .map(|e| match e {
                Entry::File { contents, .. } => contents.len(),
                Entry::Dir { .. } => 0,
            })
            .sum();
        summary.push(format!("{} → {dest}: {} entries, {} bytes", src.display(), got.len(), bytes));
        entries.extend(got);
    }
    let merged = merge(base_cfg, &entries)?;
    let out = serde_json::to_vec(&merged).map_err(|e| e.to_string())?;
    let dir = output.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        output.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode_0600()
            .open(&tmp)?;
        f.write_all(&out)?;
        f.sync_all()?;
        std::fs::rename(&tmp, output)
    };
    write().map_err(|e| format!("{}: {e}", output.display()))?;
    summary.push(format!("wrote {} ({} bytes)", output.display(), out.len()));
    Ok(summary.join("\n"))
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(file: &Value) -> Vec<u8> {
        let src = file["contents"]["source"].as_str().unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(src.strip_prefix("data:;base64,").unwrap())
            .unwrap();
        if file["contents"]["compression"] == "gzip" {
            let mut out = vec![];
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut out).unwrap();
            out
        } else {
            raw
        }
    }

    #[test]
    fn a_tree_is_carried_with_its_modes_and_replaces_the_bases_entries() {
        let t = tempfile::tempdir().unwrap();
        let etcd = t.path().join("etcd");
        std::fs::create_dir_all(etcd.join("member/snap")).unwrap();
        std::fs::write(etcd.join("member/snap/db"), vec![7u8; 100_000]).unwrap();
        std::fs::write(etcd.join("member/x"), b"1").unwrap();
        std::fs::set_permissions(etcd.join("member"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(etcd.join("member/x"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", etcd.join("link")).unwrap();
        let mut entries = collect(&etcd, "/var/lib/etcd").unwrap();
        entries.extend(collect(&etcd.join("member/x"), "/etc/kubernetes/manifests/etcd-pod.yaml").unwrap());
        let base = json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [
            {"path": "/etc/kubernetes/manifests/etcd-pod.yaml", "contents": {"source": "data:,old"}},
            {"path": "/etc/hostname", "contents": {"source": "data:,sno"}}]}});
        let m = merge(base, &entries).unwrap();
        let files = m["storage"]["files"].as_array().unwrap();
        let by = |p: &str| files.iter().filter(|f| f["path"] == p).collect::<Vec<_>>();
        assert_eq!(
            by("/etc/kubernetes/manifests/etcd-pod.yaml").len(),
            1,
            "the base's entry is replaced"
        );
        assert_eq!(decode(by("/etc/kubernetes/manifests/etcd-pod.yaml")[0]), b"1");
        assert_eq!(by("/etc/hostname").len(), 1);
        let db = by("/var/lib/etcd/member/snap/db")[0];
        assert_eq!(db["contents"]["compression"], "gzip");
        assert_eq!(decode(db), vec![7u8; 100_000]);
        assert_eq!(by("/var/lib/etcd/member/x")[0]["mode"], 0o600);
        let dirs = m["storage"]["directories"].as_array().unwrap();
        assert!(dirs.iter().any(|d| d["path"] == "/var/lib/etcd/member" && d["mode"] == 0o700));
        assert!(by("/var/lib/etcd/link").is_empty(), "links are not carried");
    }

    #[test]
    fn what_is_missing_or_not_a_config_is_refused() {
        assert!(collect(Path::new("/nonexistent/hardshift"), "/x").is_err());
        assert!(merge(json!({"storage": {}}), &[]).is_err());
        assert!(parse_carry("relative=/x").is_err());
        assert_eq!(parse_carry("/a=/b/").unwrap(), (PathBuf::from("/a"), "/b".to_string()));
        assert_eq!(parse_carry("/a").unwrap(), (PathBuf::from("/a"), "/a".to_string()));
    }

    #[test]
    fn the_output_is_written_0600_and_whole() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("base.ign");
        std::fs::write(&base, br#"{"ignition":{"version":"3.2.0"}}"#).unwrap();
        std::fs::write(t.path().join("a"), b"hello").unwrap();
        let out = t.path().join("master.ign");
        run(&base, &[format!("{}=/etc/a", t.path().join("a").display())], &out).unwrap();
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
        let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(decode(&v["storage"]["files"][0]), b"hello");
        assert!(run(&base, &["/nonexistent/x".into()], &out).is_err());
    }
}
