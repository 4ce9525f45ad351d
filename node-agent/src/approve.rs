//! `hardshift-agent approve-csrs`: a single node's post-reboot step decides which of the API's
//! pending CSRs are its own kubelet's, by the rules `hardshift approve-csrs` applies (the node's
//! name, the signer, the usages, its own names and addresses, one client certificate until it
//! registers), instead of approving whatever its bootstrap identity asked for.

use hardshift_approver::{Decision, Inventory, InventoryNode};
use std::io::Read;
use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;

/// The most either list may be: thousands of CSRs are a few MiB.
const LIMIT: u64 = 64 << 20;

fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !f.metadata().map_err(|e| format!("{}: {e}", path.display()))?.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let mut buf = Vec::new();
    f.take(LIMIT + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if buf.len() as u64 > LIMIT {
        return Err(format!("{}: more than {} MiB", path.display(), LIMIT >> 20));
    }
    serde_json::from_slice(&buf).map_err(|e| format!("{}: {e}", path.display()))
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
        hardshift_approver::list::decide(&inv, &c, &n)
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
            eprintln!("hardshift-agent approve-csrs: {}", scrub(&e));
            ExitCode::from(2)
        }
    }
}
