//! Load for `hack/bench-collector.sh`: N simulated agents, each with its own client certificate
//! and its own mTLS connection, sending a report every INTERVAL ms. The agents are the first N
//! nodes of the bundle's inventory (DIR/cluster.json, the bootstrap left out) and present the
//! certificates `hardshift create` issued them (DIR/agent-pki/agent-NODE.crt), as real agents
//! do: the collector refuses a name outside the inventory. Make a bundle with enough nodes with
//! `hack/gen-lab.py DIR N` then `hardshift create`.
//!
//! Measures ingest latency: report sent → the Ack covering it (the collector acks only after the
//! commit). At the end every agent checks that its last report was acknowledged; the script
//! then counts the stored rows.
//!
//!   simulate_agents BUNDLE_DIR ADDR AGENTS INTERVAL_MS DURATION_S
//!
//! `tests/bench_collector.rs` includes this file and calls `run` at a small size.

use anyhow::Context;
use hardshift_proto::v1::agent_client::AgentClient;
use hardshift_proto::v1::agent_message::Body;
use hardshift_proto::v1::collector_message::Body as In;
use hardshift_proto::v1::{AgentMessage, ComponentState, Health, Hello, HostState, NodeReport};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

struct Totals {
    sent: AtomicU64,
    acked: AtomicU64,
    latencies_us: Mutex<Vec<u64>>,
    /// Only reports sent once every agent had connected: the steady state, without the ramp-up's
    /// thousands of TLS handshakes on the same two cores.
    steady_us: Mutex<Vec<u64>>,
    connected: AtomicU64,
    agents: u64,
    start: Instant,
}

/// One simulated node: its inventory name and role, and the identity the bundle issued it.
pub struct SimNode {
    pub name: String,
    pub role: String,
    identity: Identity,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Summary {
    pub sent: u64,
    pub acked: u64,
    /// Each agent's name and how many reports it sent (seqs 1..=n), whether or not it failed.
    pub sent_by_node: Vec<(String, u64)>,
    /// The agents that failed, with why.
    pub failures: Vec<String>,
    /// Latencies in ms: p50, p99, max of every report, then of the steady state only.
    pub all_ms: [f64; 3],
    pub steady_ms: [f64; 3],
    pub steady_n: usize,
}

/// The first `n` nodes of the bundle in `dir` (inventory order, the bootstrap left out) with the
/// agent certificates and keys `create` wrote for them.
pub fn nodes(dir: &Path, n: usize) -> anyhow::Result<Vec<SimNode>> {
    let path = dir.join("cluster.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{} (run `hardshift create` first)", path.display()))?;
    let cluster: serde_json::Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
    let inventory: Vec<(String, String)> = cluster["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v["hostname"].as_str()?.to_string(), v["role"].as_str()?.to_string())))
        .filter(|(_, role)| role != "bootstrap")
        .collect();
    if inventory.len() < n {
        return Err(anyhow::anyhow!(
            "{} holds {} nodes besides the bootstrap, {n} agents asked for: make a bundle with enough (hack/gen-lab.py DIR {n}, then hardshift create)",
            path.display(),
            inventory.len()
        ));
    }
    inventory
        .into_iter()
        .take(n)
        .map(|(name, role)| {
            let read = |ext: &str| {
                let p = dir.join(format!("agent-pki/agent-{name}.{ext}"));
                std::fs::read_to_string(&p).with_context(|| p.display().to_string())
            };
            let identity = Identity::from_pem(read("crt")?, read("key")?);
            Ok(SimNode { name, role, identity })
        })
        .collect()
}

fn report(seq: u64, node: &str) -> NodeReport {
    let comp = |n: &str, s: &str| ComponentState {
        name: n.into(),
        health: Health::Ok as i32,
        state: s.into(),
        reason: String::new(),
        details: HashMap::from([("NRestarts".into(), "0".into())]),
    };
    NodeReport {
        seq,
        time_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
        components: vec![
            comp("kubelet", "healthy"),
            comp("kubelet-cert", "valid"),
            comp("cri", "12/12 running, 9/9 pods ready"),
            comp("kubelet.service", "active/running"),
            comp("crio.service", "active/running"),
        ],
        host: Some(HostState {
            hostname: node.into(),
            boot_id: format!("boot-{node}"),
            uptime_seconds: 3600,
            load1: 0.4,
            memory_total_bytes: 16 << 30,
            memory_available_bytes: 9 << 30,
            root_free_bytes: 80 << 30,
            var_free_bytes: 80 << 30,
            addresses: vec!["192.168.126.20".into()],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One agent's life: connect, Hello, a report per `interval` until `until`, then wait for the
/// last Ack. Records into `seq` how many reports it sent.
async fn agent(
    node: SimNode,
    ca: Certificate,
    addr: String,
    interval: Duration,
    until: Instant,
    totals: Arc<Totals>,
    seq: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let SimNode {
        name: node,
        role,
        identity,
    } = node;
    let tls = ClientTlsConfig::new()
        .ca_certificate(ca)
        .identity(identity)
        .domain_name("127.0.0.1");
    let ch: Channel = Channel::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(30))
        .connect()
        .await
        .with_context(|| node.to_string())?;
    let (tx, rx) = mpsc::channel(16);
    tx.send(AgentMessage {
        body: Some(Body::Hello(Hello {
            agent_version: "sim".into(),
            node: node.clone(),
            boot_id: format!("boot-{node}"),
            role,
            last_seq: 0,
        })),
    })
    .await?;
    let mut inbound = AgentClient::new(ch)
        .connect(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .map_err(|s| anyhow::anyhow!("{node}: {}", s.message()))?
        .into_inner();
    // The initial Ack (what is already stored).
    inbound.message().await.map_err(|s| anyhow::anyhow!("{node}: {}", s.message()))?;
    if totals.connected.fetch_add(1, Ordering::Relaxed) + 1 == totals.agents {
        // The script's CPU measure of the steady state starts here.
        eprintln!(
            "simulate: all {} agents connected after {:.1}s",
            totals.agents,
            totals.start.elapsed().as_secs_f64()
        );
    }
    let sent_at: Arc<Mutex<HashMap<u64, (Instant, bool)>>> = Default::default();
    let (s2, t2) = (sent_at.clone(), totals.clone());
    let last_acked = Arc::new(AtomicU64::new(0));
    let la = last_acked.clone();
    let acks = tokio::spawn(async move {
        while let Ok(Some(m)) = inbound.message().await {
            if let Some(In::Ack(a)) = m.body {
                let now = Instant::now();
                let mut s = s2.lock().unwrap();
                let done: Vec<u64> = s.keys().copied().filter(|k| *k <= a.highest_seq).collect();
                let mut l = t2.latencies_us.lock().unwrap();
                let mut st = t2.steady_us.lock().unwrap();
                for k in done {
                    if let Some((t, steady)) = s.remove(&k) {
                        l.push((now - t).as_micros() as u64);
                        if steady {
                            st.push((now - t).as_micros() as u64);
                        }
                        t2.acked.fetch_add(1, Ordering::Relaxed);
                    }
                }
                la.fetch_max(a.highest_seq, Ordering::Relaxed);
            }
        }
    });
    // Spread the agents over the interval, as real ones drift apart.
    let offset = Duration::from_millis(node.bytes().map(u64::from).sum::<u64>() * 7919 % interval.as_millis().max(1) as u64);
    tokio::time::sleep(offset).await;
    let mut tick = tokio::time::interval(interval);
    let mut n = 0;
    while Instant::now() < until {
        tick.tick().await;
        n += 1;
        let steady = totals.connected.load(Ordering::Relaxed) == totals.agents;
        sent_at.lock().unwrap().insert(n, (Instant::now(), steady));
        if tx
            .send(AgentMessage {
                body: Some(Body::Report(report(n, &node))),
            })
            .await
            .is_err()
        {
            return Err(anyhow::anyhow!("{node}: stream closed"));
        }
        totals.sent.fetch_add(1, Ordering::Relaxed);
        seq.store(n, Ordering::Relaxed);
    }
    // Wait for the last ack, then hang up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while last_acked.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(tx);
    acks.abort();
    if last_acked.load(Ordering::Relaxed) < n {
        return Err(anyhow::anyhow!("{node}: last report {n} never acknowledged"));
    }
    Ok(())
}

/// p50, p99 and max of `v`, in ms.
fn percentiles(mut v: Vec<u64>) -> [f64; 3] {
    v.sort_unstable();
    let at = |p: f64| {
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    [at(0.50), at(0.99), at(1.0)]
}

/// Run `nodes` against the collector at `addr` (whose server certificate `ca_pem` vouches for)
/// for `duration`, a report each per `interval`.
pub fn run(nodes: Vec<SimNode>, ca_pem: &str, addr: &str, interval: Duration, duration: Duration) -> Summary {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let totals = Arc::new(Totals {
        sent: AtomicU64::new(0),
        acked: AtomicU64::new(0),
        latencies_us: Mutex::new(Vec::new()),
        steady_us: Mutex::new(Vec::new()),
        connected: AtomicU64::new(0),
        agents: nodes.len() as u64,
        start: Instant::now(),
    });
    let ca = Certificate::from_pem(ca_pem);
    let until = Instant::now() + duration;
    let (sent_by_node, failures) = rt.block_on(async {
        let mut tasks = Vec::new();
        for (i, node) in nodes.into_iter().enumerate() {
            let (ca, addr, totals) = (ca.clone(), addr.to_string(), totals.clone());
            let (name, seq) = (node.name.clone(), Arc::new(AtomicU64::new(0)));
            let s = seq.clone();
            tasks.push((name, seq, tokio::spawn(agent(node, ca, addr, interval, until, totals, s))));
            // Ramp up: a few hundred handshakes a second, not all at once.
            if i % 100 == 99 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let (mut sent, mut failed) = (Vec::new(), Vec::new());
        for (name, seq, t) in tasks {
            match t.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed.push(format!("{e:#}")),
                Err(e) => failed.push(format!("{name}: {e}")),
            }
            sent.push((name, seq.load(Ordering::Relaxed)));
        }
        (sent, failed)
    });
    let all = std::mem::take(&mut *totals.latencies_us.lock().unwrap());
    let steady = std::mem::take(&mut *totals.steady_us.lock().unwrap());
    Summary {
        sent: totals.sent.load(Ordering::Relaxed),
        acked: totals.acked.load(Ordering::Relaxed),
        sent_by_node,
        failures,
        all_ms: percentiles(all),
        steady_n: steady.len(),
        steady_ms: percentiles(steady),
    }
}

#[allow(dead_code)] // tests/bench_collector.rs includes this file for `run`
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [dir, addr, n, interval_ms, duration_s] = a.as_slice() else {
        eprintln!("usage: simulate_agents BUNDLE_DIR ADDR AGENTS INTERVAL_MS DURATION_S");
        std::process::exit(2);
    };
    let number = |v: &str, what: &str| {
        v.parse::<u64>().unwrap_or_else(|_| {
            eprintln!("simulate: {what} {v:?} is not a whole number");
            std::process::exit(2);
        })
    };
    let n = number(n, "AGENTS") as usize;
    let interval = Duration::from_millis(number(interval_ms, "INTERVAL_MS"));
    let duration = Duration::from_secs(number(duration_s, "DURATION_S"));
    let dir = Path::new(dir);
    let t = Instant::now();
    let nodes = nodes(dir, n).unwrap_or_else(|e| {
        eprintln!("simulate: {e}");
        std::process::exit(2);
    });
    eprintln!(
        "simulate: {n} agent certificates of the bundle read in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let ca_pem = std::fs::read_to_string(dir.join("agent-pki/agent-ca.crt")).expect("agent-pki/agent-ca.crt");
    let s = run(nodes, &ca_pem, addr, interval, duration);
    for f in &s.failures {
        eprintln!("simulate: {f}");
    }
    println!(
        "agents={n} interval_ms={} duration_s={} sent={} acked={} failed_agents={} p50_ms={:.1} p99_ms={:.1} max_ms={:.1} steady_n={} steady_p50_ms={:.1} steady_p99_ms={:.1} steady_max_ms={:.1}",
        interval.as_millis(),
        duration.as_secs(),
        s.sent,
        s.acked,
        s.failures.len(),
        s.all_ms[0],
        s.all_ms[1],
        s.all_ms[2],
        s.steady_n,
        s.steady_ms[0],
        s.steady_ms[1],
        s.steady_ms[2],
    );
}
