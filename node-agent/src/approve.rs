//! `hardshift-agent approve-csrs`: a single node's post-reboot step decides which of the API's
//! pending CSRs are its own kubelet's, by the rules `hardshift approve-csrs` applies (the node's
//! name, the signer, the usages, its own names and addresses, one client certificate until it
//! registers), instead of approving whatever its bootstrap identity asked for.

use anyhow::Context;
use hardshift_approver::{Decision, Inventory, InventoryNode};
use std::io::Read;
use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;

/// The most either list may be: thousands of CSRs are a few MiB.
const LIMIT: u64 = 64 << 20;

fn read_json(path: &Path) -> anyhow::Result<serde_json::Value> {
    let f = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    if !f.metadata().with_context(|| path.display().to_string())?.is_file() {
        return Err(anyhow::anyhow!("{}: not a regular file", path.display()));
    }
    let mut buf = Vec::new();
    f.take(LIMIT + 1)
        .read_to_end(&mut buf)
        .with_context(|| path.display().to_string())?;
    if buf.len() as u64 > LIMIT {
        return Err(anyhow::anyhow!("{}: more than {} MiB", path.display(), LIMIT >> 20));
    }
    serde_json::from_slice(&buf).with_context(|| path.display().to_string())
}

/// Control characters out of what a request's author wrote, before it reaches the journal.
fn scrub(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

pub fn run(node: &str, ips: &[IpAddr], dns: &[String], csrs: &Path, nodes: &Path) -> ExitCode {
    let inv = Inventory {
        nodes: [(
            node.to_string(),
            InventoryNode {
                ips: ips.to_vec(),
                dns: dns.to_vec(),
            },
        )]
        .into(),
    };
    let decided = read_json(csrs).and_then(|c| {
        let n = read_json(nodes)?;
        hardshift_approver::list::decide(&inv, &c, &n).map_err(anyhow::Error::from)
    });
    match decided {
        Ok(decisions) => {
            for (csr, d) in decisions {
                match d {
                    // The name goes to `oc adm certificate approve` as one argument: a name the
                    // API could not hold is not passed on.
                    Decision::Approve(_)
                        if !csr
                            .name
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.') =>
                    {
                        eprintln!("refused {}: not a Kubernetes object name", scrub(&csr.name));
                    }
                    Decision::Approve(why) => {
                        println!("{}", csr.name);
                        eprintln!("approve {}: {why}", scrub(&csr.name));
                    }
                    Decision::Refuse(why) => eprintln!("refused {}: {}", scrub(&csr.name), scrub(&why)),
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hardshift-agent approve-csrs: {}", scrub(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}
