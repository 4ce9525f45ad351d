//! Fleets through existing engines: the shipped Prometheus rules and their promtool tests, the
//! Grafana dashboard's expressions, and the real Debian `prometheus` scraping two collectors of
//! two bundles, with the real `prometheus-alertmanager` delivering the silent-node alert to a
//! webhook (this test's own listener), naming the right install and node.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");

fn deploy(rel: &str) -> PathBuf {
    Path::new(DEPLOY).join(rel)
}

fn rules_file() -> PathBuf {
    deploy("prometheus/hardshift-rules.yml")
}

/// `hardshift_*` names in a text (PromQL, a rules file): what /metrics must serve.
fn metric_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.starts_with("hardshift_"))
        .map(String::from)
        .collect()
}

/// Every `expr` of the Grafana dashboard (panels' targets, annotations), and the template
/// variables' queries.
fn dashboard() -> (Vec<String>, Vec<String>) {
    let d: serde_json::Value =
        serde_json::from_slice(&std::fs::read(deploy("grafana/hardshift-dashboard.json")).unwrap()).expect("the dashboard is JSON");
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v.as_str()) {
                        ("expr", Some(e)) => out.push(e.to_string()),
                        _ => walk(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut exprs = Vec::new();
    walk(&d, &mut exprs);
    let vars: Vec<String> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["definition"].as_str().map(String::from))
        .collect();
    let cluster = d["templating"]["list"].as_array().unwrap().iter().any(|v| v["name"] == "cluster");
    assert!(cluster, "the dashboard has a `cluster` variable");
    (exprs, vars)
}

/// `promtool check rules` of a rules file holding each dashboard expression as a recording rule
/// (Grafana's own `$__rate_interval` as a duration): (passed, what promtool said).
fn promtool_parses(exprs: &[String], dir: &Path) -> (bool, String) {
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e.replace("$__rate_interval", "5m");
        // A JSON string is a YAML double-quoted scalar.
        rules.push_str(&format!(
            "      - record: dashboard:expr_{i}\n        expr: {}\n",
            serde_json::json!(e)
        ));
    }
    let f = dir.join("dashboard-rules.yml");
    std::fs::write(&f, rules).unwrap();
    run("promtool", &["check", "rules", f.to_str().unwrap()])
}

#[test]
fn shipped_rules_config_and_dashboard_pass_promtool_and_amtool() {
    let (ok, said) = run("promtool", &["check", "rules", rules_file().to_str().unwrap()]);
    assert!(ok, "promtool check rules: {said}");
    assert!(said.contains("SUCCESS: 8 rules found"), "{said}");
    let tests: Vec<String> = std::fs::read_dir(deploy("prometheus/tests"))
        .unwrap()
        .map(|e| e.unwrap().path().to_string_lossy().to_string())
        .filter(|p| p.ends_with(".yml"))
        .collect();
    assert!(!tests.is_empty());
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    let (ok, said) = run("promtool", &args);
    assert!(ok, "promtool test rules: {said}");

    // The unit tests can fail: the same tests against a rule that waits longer than they expect.
    let t = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    assert_eq!(
        rules.matches("        for: 1m\n").count(),
        2,
        "NodeSilent and BootkubeFailed wait 1m"
    );
    std::fs::write(
        t.path().join("hardshift-rules.yml"),
        rules.replace("        for: 1m\n", "        for: 3m\n"),
    )
    .unwrap();
    std::fs::create_dir(t.path().join("tests")).unwrap();
    for p in &tests {
        let name = Path::new(p).file_name().unwrap();
        std::fs::copy(p, t.path().join("tests").join(name)).unwrap();
    }
    let copied: Vec<String> = tests
        .iter()
        .map(|p| {
            t.path()
                .join("tests")
                .join(Path::new(p).file_name().unwrap())
                .to_string_lossy()
                .to_string()
        })
        .collect();
    let mut args = vec!["test", "rules"];
    args.extend(copied.iter().map(String::as_str));
    let (ok, said) = run("promtool", &args);
    assert!(
        !ok && said.contains("HardshiftNodeSilent"),
        "a slower rule passed the tests: {said}"
    );

    let cfg = deploy("prometheus/prometheus.yml");
    let (ok, said) = run("promtool", &["check", "config", "--syntax-only", cfg.to_str().unwrap()]);
    assert!(ok, "promtool check config: {said}");
    let am = deploy("alertmanager/alertmanager.yml");
    let (ok, said) = run("amtool", &["check-config", am.to_str().unwrap()]);
    assert!(ok, "amtool check-config: {said}");

    let (exprs, vars) = dashboard();
    assert!(exprs.len() >= 15, "{exprs:?}");
    for v in &vars {
        assert!(v.starts_with("label_values(hardshift_"), "{v}");
    }
    let (ok, said) = promtool_parses(&exprs, t.path());
    assert!(ok, "a dashboard expression does not parse: {said}");
    // The check can fail: an expression with a stray parenthesis is refused.
    let (bad, _) = promtool_parses(&["sum(hardshift_node_silent".to_string()], t.path());
    assert!(!bad, "promtool accepted a broken expression");
}

// ---------------------------------------------------------------------------------------------
// Two installs, one Prometheus, one Alertmanager.

/// One bundle of cluster `name`, created from the example.
fn bundle(name: &str) -> tempfile::TempDir {
    let d = example_copy();
    edit(d.path(), "install-config.yaml", "name: ocp4", &format!("name: {name}"));
    // The mirror registry's name is in the cluster's zone, which the lab's DNS serves.
    for f in ["install-config.yaml", "hardshift.yaml"] {
        let p = d.path().join(f);
        let s = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, s.replace("ocp4.example.com", &format!("{name}.example.com"))).unwrap();
    }
    create(d.path(), &[]);
    d
}

/// The id the collector names the bundle by: the ClusterVersion's clusterID in its bootstrap
/// Ignition config.
fn cluster_id(dir: &Path) -> String {
    let files = node_files(dir, "bootstrap");
    let (_, cv) = files
        .iter()
        .find(|(p, _)| p.ends_with("05-clusterversion.yaml"))
        .expect("the ClusterVersion manifest on the bootstrap");
    let cv = text(cv);
    let id = cv
        .lines()
        .find_map(|l| l.trim().strip_prefix("clusterID:"))
        .expect("a clusterID")
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .to_string();
    assert_eq!(id.len(), 36, "{id}");
    id
}

/// A real agent reporting every second as `node` of bundle `dir`, reading the bundle's admin
/// certificate as its kubelet's (so its kubelet certificate's notAfter is served).
fn agent(dir: &Path, port: u16, node: &str) -> Kill {
    let pki = dir.join("agent-pki");
    let cfg = dir.join(format!("agent-{node}.toml"));
    let mut c = agent_config(port, node, &pki, node);
    c.role = "master".into();
    c.interval_ms = 1000;
    c.state_dir = dir.join(format!("agent-state-{node}"));
    c.kubelet_cert = dir.join("pki/admin.crt");
    write_agent_config(&cfg, &c);
    spawn_agent(&cfg, &dir.join(format!("agent-{node}.log")))
}

/// What the webhook received: each notification's JSON, with when it arrived.
type Received = Arc<Mutex<Vec<(Instant, serde_json::Value)>>>;

/// An HTTP listener on loopback that keeps every POSTed JSON body and answers 200.
fn webhook() -> (u16, Received) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got: Received = Arc::default();
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let keep = keep.clone();
            std::thread::spawn(move || serve_one(conn, keep));
        }
    });
    (port, got)
}

/// Requests on one connection (Alertmanager keeps it alive) until it closes.
fn serve_one(conn: std::net::TcpStream, keep: Received) {
    let mut out = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if first {
                first = false;
                continue;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(v) = serde_json::from_slice(&body) {
            keep.lock().unwrap().push((Instant::now(), v));
        }
        if out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_err() {
            return;
        }
    }
}

/// The alerts received so far: (when, status, labels).
fn alerts(got: &Received) -> Vec<(Instant, String, serde_json::Value)> {
    got.lock()
        .unwrap()
        .iter()
        .flat_map(|(at, n)| {
            n["alerts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |a| (*at, a["status"].as_str().unwrap_or("").to_string(), a["labels"].clone()))
        })
        .collect()
}

fn http_get(url: &str) -> Option<String> {
    // reqwest has no crypto provider of its own: the workspace's is hardshift-crypto's.
    hardshift_crypto::install();
    let r = reqwest::blocking::Client::new()
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .ok()?;
    r.status().is_success().then(|| r.text().ok()).flatten()
}

/// A real program, its output in `dir/NAME.log`.
fn start(dir: &Path, name: &str, program: &str, args: &[String]) -> Kill {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    Kill(
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e} (hack/setup.sh --tests installs it)")),
    )
}

/// Seed a pending CSR for `node` into a collector's store, as its API watch records one
/// (projected by the watch's own code), created `age` ago. No API server runs here.
fn pending_csr(dir: &Path, node: &str, age: Duration) {
    let created = std::time::SystemTime::now() - age;
    let secs = created.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let ts = k8s_openapi::jiff::Timestamp::from_second(secs).unwrap().to_string();
    let obj = serde_json::json!({"metadata": {"name": format!("csr-{node}"), "creationTimestamp": ts},
        "spec": {"signerName": "kubernetes.io/kubelet-serving", "username": format!("system:node:{node}")}, "status": {}});
    let view = hardshift_collector::api::project("CertificateSigningRequest", &obj);
    let s = hardshift_collector::store::Store::open(&dir.join("collector/reports.db")).unwrap();
    s.observe("CertificateSigningRequest", "", &format!("csr-{node}"), Some(&view), secs * 1000)
        .unwrap();
}

/// Sample names of a classic-format exposition.
fn served_names(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

#[test]
fn prometheus_and_alertmanager_name_the_silent_node_of_the_right_install() {
    agent_bin();
    // Two installs with nodes of the same names, told apart only by their labels.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| bundle("alpha"));
        let b = s.spawn(|| bundle("beta"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (id_a, id_b) = (cluster_id(a.path()), cluster_id(b.path()));
    assert_ne!(id_a, id_b);

    let mut webs = Vec::new();
    let mut collectors = Vec::new();
    let mut agents = Vec::new();
    for d in [&a, &b] {
        let (port, web) = (free_port(), free_port());
        collectors.push(collector_with(
            d.path(),
            port,
            &["--web", &format!("127.0.0.1:{web}"), "--no-api-watch"],
        ));
        webs.push(web);
        for n in ["master-0", "master-1"] {
            agents.push(Some(agent(d.path(), port, n)));
        }
    }
    pending_csr(a.path(), "master-1", Duration::from_secs(20 * 60));

    // What the rules and the dashboard name is what a real collector serves.
    let metrics_a = format!("http://127.0.0.1:{}/metrics", webs[0]);
    let needed: BTreeSet<String> = {
        let (exprs, vars) = dashboard();
        let mut n = metric_names(&std::fs::read_to_string(rules_file()).unwrap());
        n.extend(exprs.iter().chain(&vars).flat_map(|e| metric_names(e)));
        n
    };
    let missing = |body: &str| -> Vec<String> {
        let served = served_names(body);
        needed.iter().filter(|n| !served.contains(*n)).cloned().collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let last = loop {
        let body = http_get(&metrics_a).unwrap_or_default();
        let gone = missing(&body);
        if gone.is_empty() {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "named by the rules or the dashboard, not served: {gone:?}\n{body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let id = format!("cluster=\"alpha\",base_domain=\"example.com\",bundle=\"{id_a}\"");
    assert!(
        last.contains(&format!("hardshift_node_reported{{{id},node=\"master-1\",role=\"master\"}} 1")),
        "{last}"
    );

    // Alertmanager, delivering to this test.
    let t = tempfile::tempdir().unwrap();
    let (hook, got) = webhook();
    let am_port = free_port();
    std::fs::write(
        t.path().join("alertmanager.yml"),
        format!(
            "route:\n  receiver: test\n  group_by: [alertname, cluster, bundle, node]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n\
             receivers:\n  - name: test\n    webhook_configs:\n      - url: http://127.0.0.1:{hook}/\n        send_resolved: false\n"
        ),
    )
    .unwrap();
    let p = |rel: &str| t.path().join(rel).to_string_lossy().to_string();
    let _am = start(
        t.path(),
        "alertmanager",
        "prometheus-alertmanager",
        &[
            format!("--config.file={}", p("alertmanager.yml")),
            format!("--storage.path={}", p("am")),
            format!("--web.listen-address=127.0.0.1:{am_port}"),
            // No gossip: one instance, nothing listening beyond loopback.
            "--cluster.listen-address=".into(),
        ],
    );
    // Prometheus: the shipped rules unchanged, both collectors every second.
    let prom_port = free_port();
    let targets: Vec<String> = webs.iter().map(|w| format!("\"127.0.0.1:{w}\"")).collect();
    std::fs::write(
        t.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
             alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"127.0.0.1:{am_port}\"]\n\
             scrape_configs:\n  - job_name: hardshift\n    static_configs:\n      - targets: [{}]\n",
            rules_file().display(),
            targets.join(", ")
        ),
    )
    .unwrap();
    let _prom = start(
        t.path(),
        "prometheus",
        "prometheus",
        &[
            format!("--config.file={}", p("prometheus.yml")),
            format!("--storage.tsdb.path={}", p("tsdb")),
            format!("--web.listen-address=127.0.0.1:{prom_port}"),
        ],
    );
    let api = |q: &str| format!("http://127.0.0.1:{prom_port}/api/v1/{q}");
    wait_for("Alertmanager and Prometheus ready", 180, || {
        http_get(&format!("http://127.0.0.1:{am_port}/-/ready")).is_some()
            && http_get(&format!("http://127.0.0.1:{prom_port}/-/ready")).is_some()
    });
    let rules = http_get(&api("rules")).unwrap();
    assert!(rules.contains("HardshiftNodeSilent"), "{rules}");
    // Both installs scraped, each node under its own install.
    wait_for("both collectors' nodes in Prometheus", 180, || {
        let q = api("query?query=count%20by%20(cluster,bundle)%20(hardshift_node_reported%20==%201)");
        http_get(&q).is_some_and(|r| {
            let v: serde_json::Value = serde_json::from_str(&r).unwrap_or_default();
            let res = v["data"]["result"].as_array().cloned().unwrap_or_default();
            [("alpha", &id_a), ("beta", &id_b)].iter().all(|(c, id)| {
                res.iter()
                    .any(|s| s["metric"]["cluster"] == *c && s["metric"]["bundle"] == id.as_str() && s["value"][1] == "2")
            })
        })
    });
    // The pipeline delivers before anything goes silent: the seeded CSR, 20 min old.
    wait_for("the pending CSR's alert at the webhook", 180, || {
        alerts(&got).iter().any(|(_, _, l)| l["alertname"] == "HardshiftCsrPendingTooLong")
    });
    let silent = |l: &serde_json::Value| l["alertname"] == "HardshiftNodeSilent";
    assert!(!alerts(&got).iter().any(|(_, _, l)| silent(l)), "{:?}", alerts(&got));

    // alpha's master-1 dies.
    agents[1].take();
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(240);
    let delivered = loop {
        if let Some((at, _, l)) = alerts(&got).into_iter().find(|(_, s, l)| silent(l) && s == "firing") {
            break (at, l);
        }
        assert!(
            Instant::now() < deadline,
            "no silent-node alert at the webhook 240 s after the kill; Prometheus says {}",
            http_get(&api("alerts")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let (at, labels) = delivered;
    eprintln!(
        "silent-node alert delivered {:.1} s after the agent was killed (rule: silent after 30 s, for: 1m; scrape and evaluation every 1 s; Alertmanager group_wait 1 s)",
        at.duration_since(killed).as_secs_f64()
    );
    assert_eq!(labels["cluster"], "alpha", "{labels}");
    assert_eq!(labels["base_domain"], "example.com", "{labels}");
    assert_eq!(labels["bundle"], id_a.as_str(), "{labels}");
    assert_eq!(labels["node"], "master-1", "{labels}");
    assert_eq!(labels["severity"], "critical", "{labels}");
    // Only that node: not alpha's other master, not beta's master-1 of the same name.
    for (_, _, l) in alerts(&got) {
        if silent(&l) {
            assert_eq!(
                (&l["bundle"], &l["node"]),
                (&serde_json::json!(id_a), &serde_json::json!("master-1")),
                "{l}"
            );
        }
        assert!(
            l["cluster"] != "beta" && l["bundle"] != id_b.as_str(),
            "an alert names the other install: {l}"
        );
    }

    // A bundle that cannot say which install it is: the collector refuses to start (exit 2),
    // naming the file, rather than serve series no one can tell apart.
    drop(collectors);
    let record = std::fs::canonicalize(a.path().join("inventory.json")).unwrap();
    std::fs::rename(&record, record.with_extension("moved")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args([
            "collector",
            "--dir",
            a.path().to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .args(["--web", &format!("127.0.0.1:{}", free_port()), "--no-api-watch"])
        .output()
        .unwrap();
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("inventory.json: missing") && said.contains("hardshift create"),
        "{said}"
    );
}
