//! `hardshift status`: the install's phase, then a line per node from the collector's store.

use crate::failure::Failure;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    store: super::StoreArgs,
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

/// One row per node from the collector's store, then a row for each node of the bundle that never
/// reported (a machine that did not boot, fetch its config or reach the collector).
pub fn run(a: Args) -> Result<u8, Failure> {
    let store = a.store.open()?;
    let rows = store.nodes().map_err(a.store.broken())?;
    // A collector that stopped acknowledging is said first, and makes the exit status 1.
    let halted = a.store.warn_if_halted();
    let code = u8::from(halted);
    let now = hardshift_collector::now_ms();
    let sums: Vec<hardshift_collector::summary::Summary> = rows.iter().map(|r| hardshift_collector::summary::summarize(r, now)).collect();
    // The bundle's nodes, when its inputs are here to name them.
    let rec = hardshift_generator::pipeline::recorded(&a.store.dir);
    let overrides = hardshift_generator::config::Overrides {
        release_image: rec.release_image,
        key_algorithm: rec.key_algorithm,
        crypto_fips: None,
    };
    let inventory = super::load_cluster(&a.store.dir, rec.release_refs.as_deref(), &overrides)
        .ok()
        .map(|c| {
            c.nodes
                .iter()
                .map(|n| {
                    (
                        hardshift_collector::phase::Member {
                            name: n.hostname.clone(),
                            role: n.role.as_str().to_string(),
                        },
                        n.ip.to_string(),
                    )
                })
                .collect::<Vec<_>>()
        });
    let silent: Vec<&(hardshift_collector::phase::Member, String)> = inventory
        .iter()
        .flatten()
        .filter(|(m, _)| !rows.iter().any(|r| r.node == m.name))
        .collect();
    if a.output == super::Output::Json {
        let mut v: Vec<serde_json::Value> = rows
            .iter()
            .zip(&sums)
            .map(|(r, s)| {
                let comps: Vec<serde_json::Value> = r
                    .last
                    .iter()
                    .flat_map(|l| &l.components)
                    .map(hardshift_proto::vocab::component_json)
                    .collect();
                let host = r.last.as_ref().and_then(|l| l.host.as_ref());
                let mut v = serde_json::to_value(s).unwrap_or_default();
                v["reported"] = true.into();
                v["boot_id"] = r.boot_id.clone().into();
                v["last_seq"] = r.last_seq.into();
                v["hostname"] = host.map(|h| h.hostname.clone()).unwrap_or_default().into();
                v["addresses"] = host.map(|h| h.addresses.clone()).unwrap_or_default().into();
                v["uptime_s"] = host.map(|h| h.uptime_seconds).unwrap_or_default().into();
                v["components"] = comps.into();
                v
            })
            .collect();
        v.extend(
            silent
                .iter()
                .map(|(m, ip)| serde_json::json!({"node": m.name, "role": m.role, "reported": false, "inventory_address": ip})),
        );
        super::print_json(&v, &a.store.scrubber())?;
        return Ok(code);
    }
    if let Some(inv) = &inventory {
        let members: Vec<hardshift_collector::phase::Member> = inv.iter().map(|(m, _)| m.clone()).collect();
        let api = store.api_objects().map_err(a.store.broken())?;
        let contact = store.api_status().map_err(a.store.broken())?;
        let checks = hardshift_collector::phase::checks(&members, &rows, &api, &contact, now);
        let done = checks.iter().take_while(|c| c.met).count();
        match hardshift_collector::phase::phase(&checks) {
            None => println!("PHASE complete ({done}/{})", checks.len()),
            Some(c) => println!(
                "PHASE {done}/{}: waiting for {}: {}",
                checks.len(),
                c.title,
                hardshift_collector::scrub::for_terminal(&c.evidence.first().cloned().unwrap_or_default())
            ),
        }
    }
    println!(
        "{:<18} {:<9} {:<16} {:>6}  {:<18} {:<22} {:<18} {:>4}  WARNINGS",
        "NODE", "ROLE", "ADDRESS", "SEEN", "KUBELET", "CRI", "ETCD", "PODS"
    );
    // Every field may quote a node: escaped and scrubbed, never printed as is.
    let clean = hardshift_collector::scrub::for_terminal;
    for (r, s) in rows.iter().zip(&sums) {
        // The root cause first (see `hardshift diagnose`), then every warning.
        let mut parts: Vec<String> = s.root_cause.iter().map(|c| format!("CAUSE {c}")).collect();
        parts.extend(s.warnings.iter().cloned());
        let warn = if parts.is_empty() { "-".to_string() } else { parts.join("; ") };
        // The node's first address as it reports it (without the prefix length).
        let addr = r
            .last
            .as_ref()
            .and_then(|l| l.host.as_ref())
            .and_then(|h| h.addresses.first())
            .map(|a| a.split('/').next().unwrap_or_default().to_string())
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<18} {:<9} {:<16} {:>5}s  {:<18} {:<22} {:<18} {:>4}  {}",
            clean(&s.node),
            clean(&s.role),
            clean(&addr),
            s.seen_ago_s,
            clean(&s.kubelet),
            clean(&s.cri),
            clean(&s.etcd),
            s.pods_not_running.len(),
            clean(&warn)
        );
    }
    for (m, ip) in silent {
        println!(
            "{:<18} {:<9} {:<16} {:>6}  {:<18} {:<22} {:<18} {:>4}  NEVER REPORTED: no DHCP, no Ignition, or no route to the collector; `hardshift diagnose {}`",
            m.name, m.role, ip, "never", "-", "-", "-", "-", m.name
        );
    }
    hardware(&rows);
    Ok(code)
}

/// The machine per node: its NIC, time sync, kernel and peers in one line, then every other
/// machine component that is not ok.
fn hardware(rows: &[hardshift_collector::store::NodeRow]) {
    use hardshift_proto::v1::Health;
    use hardshift_proto::vocab::Component;
    let clean = hardshift_collector::scrub::for_terminal;
    let mut lines = Vec::new();
    for r in rows {
        let Some(last) = &r.last else { continue };
        let get = |c: Component| c.in_report(&last.components);
        if !Component::HARDWARE.iter().any(|c| get(*c).is_some()) {
            continue;
        }
        let short = |c: Component| match get(c) {
            Some(x) => format!("{}: {} {}", c.name(), Health::of(x.health).label(), x.state),
            None => format!("{}: -", c.name()),
        };
        let main = [Component::Nic, Component::TimeSync, Component::Kernel, Component::Peers];
        lines.push(format!("{:<18} {}", clean(&r.node), clean(&main.map(short).join(" | "))));
        for c in Component::HARDWARE.iter().filter(|c| !main.contains(c)) {
            if let Some(x) = get(*c).filter(|x| matches!(Health::of(x.health), Health::Warning | Health::Failing)) {
                lines.push(format!(
                    "{:<18}   {} {}: {}",
                    "",
                    c.name(),
                    Health::of(x.health).label(),
                    clean(&x.reason)
                ));
            }
        }
    }
    if !lines.is_empty() {
        println!("HARDWARE");
        for l in lines {
            println!("{l}");
        }
    }
}
