//! The scrubber against a corpus of real-shaped log lines, each carrying a secret in a form that
//! once leaked (tests/fixtures/scrub-corpus.txt): every secret goes, the rest stays; a window of
//! lines that starts inside a key block serves none of its body; the bundle's own secrets go by
//! value, free text included.

use hardshift_collector::scrub::{scrub, Scrubber};

fn corpus() -> (String, Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/scrub-corpus.txt")).unwrap();
    let field = |k: &str| -> Vec<String> { text.lines().filter_map(|l| l.strip_prefix(k)).map(str::to_string).collect() };
    let (secrets, keep) = (field("# secret: "), field("# keep: "));
    let body: String = text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    (body, secrets, keep)
}

#[test]
fn every_form_in_the_corpus_is_scrubbed_and_the_rest_kept() {
    let (body, secrets, keep) = corpus();
    assert!(secrets.len() >= 20 && keep.len() >= 4);
    let out = scrub(&body);
    let leaked: Vec<&String> = secrets.iter().filter(|s| out.contains(s.as_str())).collect();
    assert!(leaked.is_empty(), "leaked {leaked:?} in:\n{out}");
    for k in &keep {
        assert!(out.contains(k.as_str()), "lost {k:?}:\n{out}");
    }
    // Line by line too (the dashboard's and `logs`' windows), and from every starting line.
    let lines: Vec<&str> = body.lines().collect();
    for start in 0..lines.len() {
        let window = lines[start..].join("\n");
        let out = scrub(&window);
        let leaked: Vec<&String> = secrets.iter().filter(|s| out.contains(s.as_str())).collect();
        assert!(leaked.is_empty(), "window from line {start} leaked {leaked:?}:\n{out}");
    }
    // A one-line escaped key drops only itself: what follows on the journal stays.
    assert!(out.contains("\"ok\":1") && out.contains("Pulled image"), "{out}");
}

#[test]
fn the_bundles_own_secrets_go_by_value() {
    let s = Scrubber::with_values(["kubeadmin-PW-7Hq9".to_string(), "mirror:s3cret-pass".to_string()]);
    let t = "Nov 27 console: login as kubeadmin with kubeadmin-PW-7Hq9 now\nauth bWlycm9yOnMzY3JldC1wYXNz in a file\n";
    let out = s.scrub(t);
    assert!(
        !out.contains("kubeadmin-PW-7Hq9") && !out.contains("bWlycm9yOnMzY3JldC1wYXNz"),
        "{out}"
    );
    assert!(out.contains("login as kubeadmin with") && out.contains("in a file"), "{out}");
}
