//! `hardshift verify`: check the live bundle (sums, chains, keys, SANs, expiry) and rebuild it
//! from the inputs to compare every file.

use crate::failure::Failure;
use hardshift_generator::verify::{self, Status};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: super::ClusterArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
    /// Judge the bundle's custom resources by these CRDs (a directory of YAML, e.g. the release's
    /// own, extracted from its cluster-config-api image) instead of the ones the bundle applies.
    #[arg(long, value_name = "DIR")]
    crds: Option<std::path::PathBuf>,
    /// Compare the agent the nodes' configs embed with this hardshift-agent instead of the one
    /// built beside hardshift.
    #[arg(long, value_name = "PATH")]
    agent_binary: Option<std::path::PathBuf>,
    /// Compare every master's and worker's config with what this machine-config server serves its
    /// pool (`/config/master`, `/config/worker`), e.g. https://api-int.CLUSTER:22623.
    #[arg(long, value_name = "URL")]
    against_mcs: Option<String>,
    /// The CA that verifies the machine-config server (default: the bundle's root CA, which signs
    /// its certificate).
    #[arg(long, value_name = "FILE", requires = "against_mcs")]
    mcs_ca: Option<std::path::PathBuf>,
    /// Connect to this address for the URL's host (a workstation outside the lab's DNS), still
    /// verifying the certificate for the host.
    #[arg(long, value_name = "IP", requires = "against_mcs")]
    mcs_address: Option<std::net::IpAddr>,
    /// The most one pool's answer may take, whole (connect, headers and body), e.g. 60s.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::parse_duration, requires = "against_mcs")]
    mcs_timeout: std::time::Duration,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let (checks, notes) = hardshift_generator::verify::whole::whole(&hardshift_generator::verify::whole::Request {
        dir: a.input.dir.clone(),
        release_image: a.input.release_image.clone(),
        release_refs: a.input.release_refs.clone(),
        crds: a.crds.clone(),
        agent_binary: a.agent_binary.clone(),
        exe: std::env::current_exe().map_err(Failure::other)?,
        mcs: match &a.against_mcs {
            Some(url) => Some(mcs::served(
                url,
                &mcs::ca(&a.input.dir, a.mcs_ca.as_deref())?,
                a.mcs_address,
                a.mcs_timeout,
            )?),
            None => None,
        },
    })?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    print(&checks, a.output)?;
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    eprintln!("{} checks: {} failed, {} warnings", checks.len(), failed, warned);
    Ok(if failed > 0 { 1 } else { 0 })
}

/// A machine-config server's answers, fetched as an RHCOS node's Ignition asks for them.
mod mcs {
    use crate::failure::Failure;
    use hardshift_generator::verify::mcs::{NoAnswer, Served};
    use std::path::Path;
    use std::time::Duration;

    /// The most a pool's config may be (the MCS serves a few MiB; a real one is ~1 MiB).
    const LIMIT: u64 = 64 << 20;

    pub fn ca(dir: &Path, given: Option<&Path>) -> Result<String, Failure> {
        let path = given.map(Path::to_path_buf).unwrap_or_else(|| dir.join("pki/root-ca.crt"));
        std::fs::read_to_string(&path).map_err(|e| {
            Failure::input(format!(
                "{}: {e} (--mcs-ca names the CA that verifies the machine-config server)",
                path.display()
            ))
        })
    }

    pub fn served(url: &str, ca_pem: &str, address: Option<std::net::IpAddr>, deadline: Duration) -> Result<Served, Failure> {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let parsed = reqwest::Url::parse(url).map_err(|e| Failure::input(format!("--against-mcs {url:?}: {e}")))?;
        let host = match (parsed.scheme(), parsed.host_str()) {
            ("https", Some(h)) => h.to_string(),
            _ => {
                return Err(Failure::input(format!(
                    "--against-mcs {url:?}: the machine-config server is https://HOST:22623"
                )))
            }
        };
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots
                .add(c.map_err(|e| Failure::input(format!("--mcs-ca: {e}")))?)
                .map_err(|e| Failure::input(format!("--mcs-ca: {e}")))?;
        }
        if roots.is_empty() {
            return Err(Failure::input("--mcs-ca holds no PEM certificate"));
        }
        let tls = rustls::ClientConfig::builder_with_provider(hardshift_crypto::provider())
            .with_safe_default_protocol_versions()
            .map_err(Failure::other)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // A redirect may go to another path of the same server only: never to http (the
        // config holds the cluster's secrets' hashes and the node's keys), another port or host.
        let origin = (parsed.scheme().to_string(), host.clone(), parsed.port_or_known_default());
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            let u = attempt.url();
            let same = u.scheme() == origin.0 && u.host_str() == Some(origin.1.as_str()) && u.port_or_known_default() == origin.2;
            if !same {
                let to = u.to_string();
                attempt.error(format!("a redirect to {to} (another scheme, host or port) is refused"))
            } else if attempt.previous().len() >= 5 {
                attempt.error("more than 5 redirects")
            } else {
                attempt.follow()
            }
        });
        // reqwest's blocking timeout bounds each read, not the whole answer: the deadline
        // below bounds it whole (a body trickled a byte at a time would run for ever).
        let mut http = reqwest::blocking::Client::builder()
            .use_preconfigured_tls(tls)
            .redirect(policy)
            .connect_timeout(deadline.min(Duration::from_secs(10)))
            .timeout(deadline);
        if let Some(ip) = address {
            // The port is the URL's.
            http = http.resolve(&host, std::net::SocketAddr::new(ip, 0));
        }
        let http = http.build().map_err(Failure::other)?;
        let base = url.trim_end_matches('/');
        let pools = ["master", "worker"]
            .into_iter()
            .map(|p| (p.to_string(), within(&http, &format!("{base}/config/{p}"), deadline)))
            .collect();
        Ok(Served {
            url: base.to_string(),
            pools,
        })
    }

    /// `get`, given up at the deadline whatever it waits on (a read blocked on a silent server
    /// included: reqwest bounds each read, not the whole); the abandoned request ends with its
    /// own timeout or the process.
    fn within(http: &reqwest::blocking::Client, url: &str, deadline: Duration) -> Result<Vec<u8>, NoAnswer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (http, owned) = (http.clone(), url.to_string());
        std::thread::spawn(move || {
            let _ = tx.send(get(&http, &owned, deadline));
        });
        rx.recv_timeout(deadline)
            .unwrap_or_else(|_| Err(NoAnswer(format!("no whole answer within {}s", deadline.as_secs_f64()))))
    }

    /// One pool's config, in the Ignition spec the bundle writes (without the header the server
    /// answers in spec 2).
    fn get(http: &reqwest::blocking::Client, url: &str, deadline: Duration) -> Result<Vec<u8>, NoAnswer> {
        use std::io::Read;
        let start = std::time::Instant::now();
        let late = || NoAnswer(format!("no whole answer within {}s", deadline.as_secs_f64()));
        let accept = format!(
            "application/vnd.coreos.ignition+json;version={}, */*;q=0.1",
            hardshift_generator::ignition::VERSION
        );
        let r = http.get(url).header("Accept", accept).send().map_err(|e| NoAnswer(chain(&e)))?;
        if !r.status().is_success() {
            return Err(NoAnswer(format!("HTTP {}", r.status())));
        }
        if r.content_length().is_some_and(|n| n > LIMIT) {
            return Err(NoAnswer(format!("more than {} MiB", LIMIT >> 20)));
        }
        let mut body = Vec::new();
        let mut r = r.take(LIMIT + 1);
        let mut chunk = [0u8; 64 << 10];
        loop {
            if start.elapsed() > deadline {
                return Err(late());
            }
            match r.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
                Err(e) if start.elapsed() > deadline => return Err(NoAnswer(format!("{}: {e}", late()))),
                Err(e) => return Err(NoAnswer(e.to_string())),
            }
        }
        if body.len() as u64 > LIMIT {
            return Err(NoAnswer(format!("more than {} MiB", LIMIT >> 20)));
        }
        Ok(body)
    }

    /// An error and its causes (reqwest's own says only "error sending request").
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }
}

/// The checks as a table, or as JSON with `-o json`.
fn print(checks: &[verify::Check], output: super::Output) -> Result<(), Failure> {
    if output == super::Output::Json {
        println!("{}", serde_json::to_string_pretty(checks).map_err(Failure::other)?);
    } else {
        let w = |f: fn(&verify::Check) -> usize| checks.iter().map(f).max().unwrap_or(0);
        let (wn, ws, wi) = (w(|c| c.name.len()), w(|c| c.subject.len()).max(7), w(|c| c.issuer.len()).max(6));
        println!(
            "{:<wn$}  {:<ws$}  {:<wi$}  {:<10}  {:<6}  DETAIL",
            "NAME", "SUBJECT", "ISSUER", "EXPIRES", "STATUS"
        );
        for c in checks {
            let st = match c.status {
                Status::Ok => "ok",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            println!(
                "{:<wn$}  {:<ws$}  {:<wi$}  {:<10}  {:<6}  {}",
                c.name, c.subject, c.issuer, c.expires, st, c.detail
            );
        }
    }
    Ok(())
}
