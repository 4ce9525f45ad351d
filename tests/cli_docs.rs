//! What a daily tool is expected to carry: completions a real shell uses, man pages `man` renders
//! without a warning, and a `--version` that names the release the bundles target.

use std::process::Command;

fn hardshift(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hardshift")).args(args).output().unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), s(&out.stdout), s(&out.stderr))
}

/// What bash's completion function offers for `words` (the cursor after the last one).
fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let program = format!(
        "source \"$1\"\nCOMP_WORDS=({words})\nCOMP_CWORD={cword}\nCOMP_LINE='{line}'\nCOMP_POINT={point}\n\
         _hardshift hardshift '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        words = words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
        cword = words.len() - 1,
        point = line.len(),
        cur = words[words.len() - 1],
        prev = words[words.len() - 2],
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hardshift.bash");
    std::fs::write(&file, script).unwrap();
    let out = Command::new("bash").args(["-c", &program, "bash"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn bash_completes_commands_and_their_flags() {
    let (ok, script, err) = hardshift(&["completions", "bash"]);
    assert!(ok, "{err}");
    assert_eq!(bash_completes(&script, &["hardshift", "cre"]), ["create"]);
    let flags = bash_completes(&script, &["hardshift", "create", "--self"]);
    assert_eq!(flags, ["--self-contained-nodes"], "{flags:?}");
    let subs = bash_completes(&script, &["hardshift", "release", ""]);
    assert!(subs.iter().any(|s| s == "pull") && subs.iter().any(|s| s == "show"), "{subs:?}");
}

#[test]
fn every_shells_script_is_one_its_shell_parses() {
    for (shell, check) in [("zsh", vec!["zsh", "-n"]), ("fish", vec!["fish", "--no-execute"])] {
        let (ok, script, err) = hardshift(&["completions", shell]);
        assert!(ok && script.contains("create"), "{shell}: {err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(format!("hardshift.{shell}"));
        std::fs::write(&file, &script).unwrap();
        let out = Command::new(check[0]).args(&check[1..]).arg(&file).output();
        let out = out.unwrap_or_else(|e| panic!("{shell} (hack/setup.sh --tests installs it): {e}"));
        assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let (ok, _, err) = hardshift(&["completions", "tcsh"]);
    assert!(!ok && err.contains("possible values"), "{err}");
}

#[test]
fn a_man_page_for_every_command_and_man_renders_each_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man");
    let (ok, said, err) = hardshift(&["man", "--out", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (_, help, _) = hardshift(&["--help"]);
    // Every command `--help` lists has its page, and so has each of `release`'s.
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() > 15, "{help}");
    let mut want: Vec<String> = commands.iter().map(|c| format!("hardshift-{c}.1")).collect();
    want.extend(["hardshift.1", "hardshift-release-pull.1", "hardshift-release-show.1"].map(String::from));
    for page in &want {
        let path = out.join(page);
        assert!(path.is_file(), "{page} missing; {said}");
        // groff as man runs it (-k: UTF-8 input through preconv), warnings on (-ww), output
        // discarded (-z): a warning is a failure.
        let r = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            r.status.success() && r.stderr.is_empty(),
            "{page}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let text = Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(&path)
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        let name = page.trim_end_matches(".1");
        assert!(text.contains("NAME") && text.contains(name), "{page}:\n{text}");
    }
    // A file where the directory should be: refused, exit 2.
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let r = Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args(["man", "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    // A link to a directory (a distribution's man1 often is one) is that directory.
    let real = dir.path().join("real-man1");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("man1");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (ok, said, err) = hardshift(&["man", "--out", link.to_str().unwrap()]);
    assert!(ok, "{said}{err}");
    assert!(real.join("hardshift.1").is_file());
}

#[test]
fn the_version_names_the_release_it_targets() {
    let (ok, short, _) = hardshift(&["-V"]);
    assert!(ok);
    assert_eq!(
        short.trim(),
        format!(
            "hardshift {} (OpenShift {}, Kubernetes {})",
            env!("CARGO_PKG_VERSION"),
            hardshift_generator::release::TARGET_OPENSHIFT,
            hardshift_generator::release::TARGET_KUBERNETES
        )
    );
    let (_, long, _) = hardshift(&["--version"]);
    assert!(long.starts_with(short.trim()) && long.contains("crypto: AWS-LC"), "{long}");
}
