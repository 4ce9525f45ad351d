//! `hardshift-agent in-place-config`: a single node's master config, made on its live system once
//! bootkube is done (hardshift's step in place of the installer's `cluster-bootstrap
//! bootstrap-in-place`). The config `create` wrote for the master (`--base`) takes what only the
//! live system holds (`--carry SRC=DEST`): etcd's data, the bootstrap control plane's pods,
//! secrets and configs, and the agent itself. Each file keeps its mode and goes in gzip-compressed
//! in a data URL; each directory keeps its mode. The result is written 0600 (it holds keys),
//! through a temporary file and a rename, so `coreos-installer` never reads half a config.

use anyhow::Context;
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

/// The most the base config may be (a master's is a few MiB).
const BASE_LIMIT: u64 = 64 << 20;
/// The most all carried files may be together: the config is read whole into memory by Ignition
/// on the first boot, and etcd's data after bootkube is tens of MiB.
pub const CARRY_LIMIT: u64 = 512 << 20;

/// What `--carry SRC=DEST` names (`SRC` alone: the same path on the installed system). Both
/// plain absolute paths: not `/` itself, no `.` or `..` or empty component (DEST lands in the
/// installed system's tree as it is written).
pub fn parse_carry(arg: &str) -> anyhow::Result<(PathBuf, String)> {
    let (src, dest) = arg.split_once('=').unwrap_or((arg, arg));
    for (what, p) in [("SRC", src), ("DEST", dest)] {
        let trimmed = p.trim_end_matches('/');
        if !p.starts_with('/') {
            return Err(anyhow::anyhow!("--carry {arg:?}: {what} must be an absolute path"));
        }
        if trimmed.is_empty() {
            return Err(anyhow::anyhow!("--carry {arg:?}: {what} is / itself"));
        }
        if trimmed[1..].split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(anyhow::anyhow!(
                "--carry {arg:?}: {what} must be a plain path (no `.`, `..` or `//`)"
            ));
        }
    }
    Ok((PathBuf::from(src), dest.trim_end_matches('/').to_string()))
}

/// A regular file's bytes, at most `limit` (`state_file::read`), the path in the message.
fn read_file(path: &Path, limit: u64) -> anyhow::Result<Vec<u8>> {
    crate::state_file::read(path, limit).with_context(|| path.display().to_string())
}

/// Everything under `src` (a file or a directory, walked without following links), placed at
/// `dest`. A missing source is an error: the config would lack what the master needs. `budget`:
/// the bytes the files may still take, all carries together.
pub fn collect(src: &Path, dest: &str, budget: &mut u64) -> anyhow::Result<Vec<Entry>> {
    let meta = std::fs::symlink_metadata(src).with_context(|| src.display().to_string())?;
    let mode = meta.permissions().mode() & 0o7777;
    if meta.is_file() {
        let contents = read_file(src, *budget).with_context(|| format!("all carried files together may be {} MiB", CARRY_LIMIT >> 20))?;
        *budget -= contents.len() as u64;
        return Ok(vec![Entry::File {
            path: dest.to_string(),
            mode,
            contents,
        }]);
    }
    if !meta.is_dir() {
        return Err(anyhow::anyhow!(
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
        .with_context(|| src.display().to_string())?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| src.display().to_string())?;
    names.sort();
    for p in names {
        let ft = std::fs::symlink_metadata(&p).with_context(|| p.display().to_string())?;
        // Sockets, fifos and links are the running system's, not state to install.
        if !ft.is_file() && !ft.is_dir() {
            continue;
        }
        // An Ignition path is a JSON string: a name that is not UTF-8 cannot be carried as it
        // is, and renamed it would not be the file etcd or a pod looks for.
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .with_context(|| format!("{}: a name that is not UTF-8 cannot go into an Ignition config", p.display()))?;
        out.extend(collect(&p, &format!("{dest}/{name}"), budget)?);
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
pub fn merge(mut base: Value, entries: &[Entry]) -> anyhow::Result<Value> {
    if base["ignition"]["version"].as_str().is_none() {
        return Err(anyhow::anyhow!("the base is not an Ignition config (no ignition.version)"));
    }
    let paths: std::collections::BTreeSet<&str> = entries
        .iter()
        .map(|e| match e {
            Entry::File { path, .. } | Entry::Dir { path, .. } => path.as_str(),
        })
        .collect();
    let storage = base
        .as_object_mut()
        .context("the base is not a JSON object")?
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
            .context("storage is not an object")?
            .entry(key)
            .or_insert_with(|| json!([]));
        list.as_array_mut()
            .with_context(|| format!("storage.{key} is not a list"))?
            .extend(more);
    }
    Ok(base)
}

/// The command: read, carry, merge, write (0600, atomically). Prints what it carried.
pub fn run(base: &Path, carry: &[String], output: &Path) -> anyhow::Result<String> {
    let text = read_file(base, BASE_LIMIT)?;
    let base_cfg: Value = serde_json::from_slice(&text).with_context(|| base.display().to_string())?;
    let carries: Vec<(PathBuf, String)> = carry.iter().map(|a| parse_carry(a)).collect::<Result<_, _>>()?;
    let mut entries = vec![];
    let mut summary = vec![];
    let mut budget = CARRY_LIMIT;
    for (src, dest) in carries {
        let got = collect(&src, &dest, &mut budget)?;
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
    let out = serde_json::to_vec(&merged).context("the merged config")?;
    // The output holds the cluster's keys: 0600, through a temporary of its own.
    crate::state_file::write(output, &out, 0o600, true).with_context(|| output.display().to_string())?;
    summary.push(format!("wrote {} ({} bytes)", output.display(), out.len()));
    Ok(summary.join("\n"))
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
        let mut budget = CARRY_LIMIT;
        let mut entries = collect(&etcd, "/var/lib/etcd", &mut budget).unwrap();
        entries.extend(collect(&etcd.join("member/x"), "/etc/kubernetes/manifests/etcd-pod.yaml", &mut budget).unwrap());
        assert_eq!(budget, CARRY_LIMIT - 100_002, "member/x is carried twice");
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
        assert!(collect(Path::new("/nonexistent/hardshift"), "/x", &mut CARRY_LIMIT.clone()).is_err());
        assert!(merge(json!({"storage": {}}), &[]).is_err());
        assert!(parse_carry("relative=/x").is_err());
        for bad in [
            "/etc/a=/",
            "/=/x",
            "/etc/a=/etc/../../x",
            "/etc/a=/etc/./x",
            "/etc/a=/etc//x",
            "/etc/../x=/y",
        ] {
            assert!(parse_carry(bad).is_err(), "{bad}");
        }
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

    /// The probe's cases: a planted 0644 temporary file or a link at its name; a FIFO as the
    /// base; a tree above the cap; a name that is not UTF-8.
    #[test]
    fn planted_temporaries_fifos_floods_and_odd_names_are_refused_or_bypassed() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("base.ign");
        std::fs::write(&base, br#"{"ignition":{"version":"3.2.0"}}"#).unwrap();
        let out = t.path().join("master.ign");
        let tmp = crate::state_file::temporary(&out);
        // A planted world-readable temporary: replaced, the output still 0600.
        std::fs::write(&tmp, b"planted").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        run(&base, &[], &out).unwrap();
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
        // A planted link: not written through.
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        run(&base, &[], &out).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
        // A FIFO as the base or a carried file: refused at once, never waited on.
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = run(&fifo, &[], &out).unwrap_err();
        assert!(format!("{e:#}").contains("not a regular file"), "{e}");
        // More than the cap, all carries together (the size is judged before a byte is read).
        let big = t.path().join("big");
        std::fs::File::create(&big).unwrap().set_len(CARRY_LIMIT + 1).unwrap();
        let e = run(&base, &[format!("{}=/a", big.display())], &out).unwrap_err();
        assert!(format!("{e:#}").contains("more than the 512 MiB"), "{e}");
        std::fs::write(t.path().join("ten"), [1u8; 10]).unwrap();
        let mut budget = 15;
        collect(&t.path().join("ten"), "/a", &mut budget).unwrap();
        let e = collect(&t.path().join("ten"), "/b", &mut budget).unwrap_err();
        assert!(format!("{e:#}").contains("more than the 5 bytes"), "{e}");
        // A name that is not UTF-8: refused, not renamed.
        let tree = t.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join(std::ffi::OsStr::from_bytes(b"db\xff")), b"x").unwrap();
        let e = run(&base, &[format!("{}=/var/lib/etcd", tree.display())], &out).unwrap_err();
        assert!(format!("{e:#}").contains("not UTF-8"), "{e}");
    }
}
