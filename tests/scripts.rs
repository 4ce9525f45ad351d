//! The scripts under hack/: each parses (bash -n), and none runs a binary from a fixed
//! `target/` path (with CARGO_TARGET_DIR set it would time or run a missing or stale binary:
//! they find it through hack/target-dir.sh, as cargo itself resolves the directory).

use std::path::Path;
use std::process::Command;

fn scripts() -> Vec<std::path::PathBuf> {
    let hack = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack");
    let mut out: Vec<_> = std::fs::read_dir(&hack)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    out.sort();
    assert!(out.len() > 10, "{out:?}");
    out
}

#[test]
fn every_hack_script_parses() {
    let bad: Vec<String> = scripts()
        .into_iter()
        .filter_map(|s| {
            let out = Command::new("bash").arg("-n").arg(&s).output().unwrap();
            (!out.status.success()).then(|| format!("{}: {}", s.display(), String::from_utf8_lossy(&out.stderr)))
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn no_script_runs_a_binary_from_a_fixed_target_path() {
    let fixed = regex_free_find(&["target/release/", "target/debug/", "target/agent/"]);
    assert!(fixed.is_empty(), "use hack/target-dir.sh:\n{}", fixed.join("\n"));
    // And the helper answers as cargo does, CARGO_TARGET_DIR included.
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/target-dir.sh"))
        .env("CARGO_TARGET_DIR", "/nonexistent/elsewhere")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "/nonexistent/elsewhere");
}

/// Lines of the scripts holding any of `needles` outside a comment.
fn regex_free_find(needles: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for s in scripts() {
        for (i, line) in std::fs::read_to_string(&s).unwrap().lines().enumerate() {
            let code = line.split(" #").next().unwrap_or("");
            if code.trim_start().starts_with('#') {
                continue;
            }
            if needles.iter().any(|n| {
                code.match_indices(n).any(|(at, _)| {
                    // `$T/release/...` and `fuzz-cov/...` are fine; a bare `target/` is not.
                    let before = code[..at].chars().last();
                    !matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == '-' || c == '/' || c == '$')
                })
            }) {
                out.push(format!("{}:{}: {line}", s.display(), i + 1));
            }
        }
    }
    out
}
