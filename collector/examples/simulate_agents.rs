//! Load for `hack/bench-collector.sh`: N simulated agents, each with its own client certificate
//! (CN = its node name, signed here by the bundle's agent CA), each on its own mTLS connection,
//! sending a report every INTERVAL ms. Measures ingest latency: report sent → the Ack covering it
//! (the collector acks only after the commit). At the end every agent checks that its last report
//! was acknowledged; the script then counts the stored rows.
//!
//!   simulate_agents BUNDLE_DIR ADDR AGENTS INTERVAL_MS DURATION_S

use hardshift_proto::v1::agent_client::AgentClient;
use hardshift_proto::v1::agent_message::Body;
use hardshift_proto::v1::collector_message::Body as In;
use hardshift_proto::v1::{AgentMessage, ComponentState, Health, Hello, HostState, NodeReport};
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, PKCS_ECDSA_P256_SHA256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

struct Totals {
    sent: AtomicU64,
    acked: AtomicU64,
    failed: AtomicU64,
    latencies_us: Mutex<Vec<u64>>,
    /// Only reports sent once every agent had connected: the steady state, without the ramp-up's
    /// thousands of TLS handshakes on the same two cores.
    steady_us: Mutex<Vec<u64>>,
    connected: AtomicU64,
    agents: u64,
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

async fn agent(
    node: String,
    identity: Identity,
    ca: Certificate,
    addr: String,
    interval: Duration,
    until: Instant,
    totals: Arc<Totals>,
) -> Result<(), String> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(ca)
        .identity(identity)
        .domain_name("127.0.0.1");
    let ch: Channel = Channel::from_shared(format!("https://{addr}"))
        .map_err(|e| e.to_string())?
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(30))
        .connect()
        .await
        .map_err(|e| format!("{node}: {e}"))?;
    let (tx, rx) = mpsc::channel(16);
    let boot = format!("boot-{node}");
    tx.send(AgentMessage {
        body: Some(Body::Hello(Hello {
            agent_version: "sim".into(),
            node: node.clone(),
            boot_id: boot.clone(),
            role: "worker".into(),
            last_seq: 0,
        })),
    })
    .await
    .map_err(|e| e.to_string())?;
    let mut inbound = AgentClient::new(ch)
        .connect(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .map_err(|s| format!("{node}: {}", s.message()))?
        .into_inner();
    // The initial Ack (what is already stored).
    inbound.message().await.map_err(|s| s.message().to_string())?;
    totals.connected.fetch_add(1, Ordering::Relaxed);
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
    let mut seq = 0;
    while Instant::now() < until {
        tick.tick().await;
        seq += 1;
        let steady = totals.connected.load(Ordering::Relaxed) == totals.agents;
        sent_at.lock().unwrap().insert(seq, (Instant::now(), steady));
        totals.sent.fetch_add(1, Ordering::Relaxed);
        if tx
            .send(AgentMessage {
                body: Some(Body::Report(report(seq, &node))),
            })
            .await
            .is_err()
        {
            return Err(format!("{node}: stream closed"));
        }
    }
    // Wait for the last ack, then hang up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while last_acked.load(Ordering::Relaxed) < seq && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(tx);
    acks.abort();
    if last_acked.load(Ordering::Relaxed) < seq {
        return Err(format!("{node}: last report {seq} never acknowledged"));
    }
    Ok(())
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [dir, addr, n, interval_ms, duration_s] = a.as_slice() else {
        eprintln!("usage: simulate_agents BUNDLE_DIR ADDR AGENTS INTERVAL_MS DURATION_S");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("AGENTS");
    let interval = Duration::from_millis(interval_ms.parse().expect("INTERVAL_MS"));
    let duration = Duration::from_secs(duration_s.parse().expect("DURATION_S"));
    let dir = std::path::Path::new(dir);
    let ca_pem = std::fs::read_to_string(dir.join("agent-pki/agent-ca.crt")).expect("agent-ca.crt");
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(dir.join("agent-pki/agent-ca.key")).expect("agent-ca.key")).expect("CA key");
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).expect("CA");
    let t = Instant::now();
    let identities: Vec<(String, Identity)> = (0..n)
        .map(|i| {
            let node = format!("sim-{i:05}");
            let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name.push(DnType::CommonName, node.clone());
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let cert = p.signed_by(&key, &issuer).unwrap();
            (node, Identity::from_pem(cert.pem(), key.serialize_pem()))
        })
        .collect();
    eprintln!("simulate: {n} client certificates in {:.1}s", t.elapsed().as_secs_f64());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let totals = Arc::new(Totals {
        sent: AtomicU64::new(0),
        acked: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        latencies_us: Mutex::new(Vec::new()),
        steady_us: Mutex::new(Vec::new()),
        connected: AtomicU64::new(0),
        agents: n as u64,
    });
    let ca = Certificate::from_pem(ca_pem);
    let until = Instant::now() + duration;
    rt.block_on(async {
        let mut tasks = Vec::new();
        for (i, (node, id)) in identities.into_iter().enumerate() {
            let (ca, addr, totals) = (ca.clone(), addr.clone(), totals.clone());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = agent(node, id, ca, addr, interval, until, totals.clone()).await {
                    eprintln!("simulate: {e}");
                    totals.failed.fetch_add(1, Ordering::Relaxed);
                }
            }));
            // Ramp up: a few hundred handshakes a second, not all at once.
            if i % 100 == 99 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    let pct = |v: &mut Vec<u64>, p: f64| {
        v.sort_unstable();
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    let mut all = totals.latencies_us.lock().unwrap().clone();
    let mut steady = totals.steady_us.lock().unwrap().clone();
    println!(
        "agents={n} interval_ms={} duration_s={} sent={} acked={} failed_agents={} p50_ms={:.1} p99_ms={:.1} max_ms={:.1} steady_n={} steady_p50_ms={:.1} steady_p99_ms={:.1} steady_max_ms={:.1}",
        interval.as_millis(),
        duration.as_secs(),
        totals.sent.load(Ordering::Relaxed),
        totals.acked.load(Ordering::Relaxed),
        totals.failed.load(Ordering::Relaxed),
        pct(&mut all, 0.50),
        pct(&mut all, 0.99),
        pct(&mut all, 1.0),
        steady.len(),
        pct(&mut steady, 0.50),
        pct(&mut steady, 0.99),
        pct(&mut steady, 1.0),
    );
}
