//! The generated PKI, checked by openssl: every chain, purpose, EKU, SAN, subject and key pair,
//! against expectations written here from the tutorial's stage 05 (not from the generator).

mod common;

use common::*;
use num_bigint::BigUint;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const INTERMEDIATES: &[&str] = &["etcd-ca", "kubernetes-ca", "front-proxy-ca", "kubelet-ca"];
/// The signers seeded for the operators: self-signed like the installer's (docs/operator-seeds.md).
const SIGNERS: &[&str] = &[
    "etcd-metric-ca",
    "kube-apiserver-localhost-signer",
    "kube-apiserver-service-network-signer",
    "kube-apiserver-lb-signer",
    "kube-apiserver-to-kubelet-signer",
    "kube-control-plane-signer",
    "kubelet-signer",
];

struct Want {
    name: &'static str,
    subject: &'static str,
    server: bool,
    client: bool,
    sans: &'static [&'static str],
}

/// The API server's serving certificates, each from its serving signer (served by SNI):
/// (name, issuer, SANs).
const SERVING: &[(&str, &str, &[&str])] = &[
    (
        "kube-apiserver-service-network-server",
        "kube-apiserver-service-network-signer",
        &[
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
            "DNS:openshift.default.svc",
            "IP Address:172.30.0.1",
        ],
    ),
    (
        "kube-apiserver-localhost-server",
        "kube-apiserver-localhost-signer",
        &["DNS:localhost", "IP Address:127.0.0.1", "IP Address:0:0:0:0:0:0:0:1"],
    ),
    (
        "kube-apiserver-lb-server",
        "kube-apiserver-lb-signer",
        &["DNS:api.ocp4.example.com"],
    ),
    (
        "kube-apiserver-internal-lb-server",
        "kube-apiserver-lb-signer",
        &["DNS:api-int.ocp4.example.com"],
    ),
];

fn wants() -> Vec<Want> {
    let w = |name, subject, server, client, sans| Want {
        name,
        subject,
        server,
        client,
        sans,
    };
    vec![
        w(
            "etcd-peer-bootstrap",
            "CN=etcd-peer-bootstrap",
            true,
            true,
            &[
                "DNS:bootstrap.ocp4.example.com",
                "DNS:localhost",
                "IP Address:192.168.126.100",
                "IP Address:127.0.0.1",
            ],
        ),
        w(
            "etcd-peer-master-0",
            "CN=etcd-peer-master-0",
            true,
            true,
            &[
                "DNS:master-0.ocp4.example.com",
                "DNS:etcd-0.ocp4.example.com",
                "DNS:localhost",
                "IP Address:192.168.126.101",
                "IP Address:127.0.0.1",
            ],
        ),
        w(
            "etcd-peer-master-2",
            "CN=etcd-peer-master-2",
            true,
            true,
            &[
                "DNS:master-2.ocp4.example.com",
                "DNS:etcd-2.ocp4.example.com",
                "IP Address:192.168.126.103",
            ],
        ),
        w(
            "etcd-server",
            "CN=etcd-server",
            true,
            true,
            &[
                "DNS:localhost",
                "DNS:etcd.ocp4.example.com",
                "IP Address:192.168.126.100",
                "IP Address:192.168.126.101",
                "IP Address:192.168.126.102",
                "IP Address:192.168.126.103",
                "IP Address:127.0.0.1",
            ],
        ),
        w("etcd-client", "CN=system:etcd-client", false, true, &[]),
        w("kube-apiserver-kubelet-client", "CN=system:kube-apiserver", false, true, &[]),
        w("kube-controller-manager", "CN=system:kube-controller-manager", false, true, &[]),
        w("kube-scheduler", "CN=system:kube-scheduler", false, true, &[]),
        w("front-proxy-client", "CN=front-proxy-client", false, true, &[]),
        w("admin", "O=system:masters, CN=system:admin", false, true, &[]),
        w("kubelet-bootstrap", "CN=system:bootstrapper", false, true, &[]),
        // Under root-ca directly, as the installer's: the nodes' pointer configs trust root-ca.
        w(
            "machine-config-server",
            "CN=system:machine-config-server",
            true,
            false,
            &["DNS:api-int.ocp4.example.com"],
        ),
    ]
}

fn x509_text(path: &Path) -> String {
    let (ok, out) = run(
        "openssl",
        &[
            "x509",
            "-noout",
            "-text",
            "-nameopt",
            "sep_comma_plus_space",
            "-in",
            path.to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
    out
}

fn verify_with(ca: &Path, untrusted: Option<&Path>, purpose: &str, leaf: &Path) -> (bool, String) {
    let mut args = vec!["verify", "-CAfile", ca.to_str().unwrap(), "-purpose", purpose];
    if let Some(u) = untrusted {
        args.extend(["-untrusted", u.to_str().unwrap()]);
    }
    args.push(leaf.to_str().unwrap());
    run("openssl", &args)
}

fn public_key_of(args: &[&str]) -> String {
    let (ok, out) = run("openssl", args);
    assert!(ok, "{out}");
    out
}

/// One of openssl's `-text` numbers (`prime1:` then hex lines with colons).
fn openssl_number(text: &str, label: &str) -> BigUint {
    let mut lines = text.lines().skip_while(|l| l.trim() != label).skip(1);
    let hex: String = lines
        .by_ref()
        .take_while(|l| l.starts_with("    "))
        .flat_map(|l| l.trim().split(':'))
        .collect();
    BigUint::parse_bytes(hex.as_bytes(), 16).unwrap_or_else(|| panic!("{label} in\n{text}"))
}

/// Every private key of the bundle that is RSA: openssl's own check, then FIPS 186-5 A.1.3's
/// bounds, computed here: |p - q| > 2^(nlen/2 - 100) and 2^(nlen/2) < d < lcm(p-1, q-1).
fn check_rsa_keys(dir: &Path) -> usize {
    let mut keys = vec![];
    for sub in ["pki", "agent-pki"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "key") {
                keys.push(e.path());
            }
        }
    }
    let mut rsa = 0;
    for key in keys {
        let k = key.to_str().unwrap();
        let (ok, text) = run("openssl", &["pkey", "-in", k, "-noout", "-text"]);
        assert!(ok, "{k}: {text}");
        if !text.contains("Private-Key: (") || !text.contains("prime1:") {
            continue;
        }
        rsa += 1;
        let (ok, out) = run("openssl", &["rsa", "-check", "-noout", "-in", k]);
        assert!(ok && out.contains("RSA key ok"), "{k}: openssl rsa -check: {out}");
        let n = openssl_number(&text, "modulus:");
        let (p, q, d) = (
            openssl_number(&text, "prime1:"),
            openssl_number(&text, "prime2:"),
            openssl_number(&text, "privateExponent:"),
        );
        let nlen = n.bits();
        assert!(nlen == 2048 || nlen == 4096, "{k}: {nlen} bits");
        assert_eq!(&p * &q, n, "{k}: n = pq");
        let half = nlen / 2;
        let diff = if p > q { &p - &q } else { &q - &p };
        assert!(
            diff.bits() > half - 100,
            "{k}: |p - q| has {} bits, FIPS 186-5 wants more than {}",
            diff.bits(),
            half - 100
        );
        assert!(p.bits() == half && q.bits() == half, "{k}: p and q of {half} bits");
        assert!(d.bits() > half, "{k}: d has {} bits, FIPS 186-5 wants d > 2^{half}", d.bits());
        let one = BigUint::from(1u8);
        let (p1, q1) = (&p - &one, &q - &one);
        let lcm = &p1 * &q1 / gcd(p1.clone(), q1.clone());
        assert!(d < lcm, "{k}: d < lcm(p-1, q-1)");
        // 2^16 < e < 2^256, odd: the usual 65537.
        assert!(text.contains("publicExponent: 65537 (0x10001)"), "{k}: e");
    }
    rsa
}

fn gcd(mut a: BigUint, mut b: BigUint) -> BigUint {
    while b != BigUint::from(0u8) {
        let r = &a % &b;
        a = b;
        b = r;
    }
    a
}

fn check_bundle(dir: &Path, key_word: &str) {
    let pki_dir = dir.join("pki");
    let inter = dir.join("intermediates.pem");
    let chain: String = INTERMEDIATES
        .iter()
        .map(|c| std::fs::read_to_string(pki(dir, &format!("{c}.crt"))).unwrap())
        .collect();
    std::fs::write(&inter, chain).unwrap();
    let root = pki(dir, "root-ca.crt");

    // The CAs: root self-signed without a path limit, intermediates under it.
    let root_text = x509_text(&root);
    assert!(root_text.contains("CA:TRUE"), "{root_text}");
    for ca in INTERMEDIATES {
        let t = x509_text(&pki(dir, &format!("{ca}.crt")));
        assert!(t.contains("CA:TRUE"), "{ca}: {t}");
        assert!(t.contains("Certificate Sign"), "{ca}: {t}");
        let (ok, out) = verify_with(&root, Some(&inter), "any", &pki(dir, &format!("{ca}.crt")));
        assert!(ok, "{ca}: {out}");
    }

    for w in wants() {
        let crt = pki_dir.join(format!("{}.crt", w.name));
        let key = pki_dir.join(format!("{}.key", w.name));
        let t = x509_text(&crt);
        assert!(t.contains(&format!("Subject: {}\n", w.subject)), "{}: subject\n{t}", w.name);
        assert!(t.contains(key_word), "{}: key type {key_word}\n{t}", w.name);
        assert_eq!(t.contains("TLS Web Server Authentication"), w.server, "{}: serverAuth\n{t}", w.name);
        assert_eq!(t.contains("TLS Web Client Authentication"), w.client, "{}: clientAuth\n{t}", w.name);
        assert!(t.contains("CA:FALSE"), "{}: must not be a CA", w.name);
        for san in w.sans {
            let listed = t.lines().any(|l| l.split(", ").any(|part| part.trim() == *san));
            assert!(listed, "{}: SAN {san} missing\n{t}", w.name);
        }
        if w.sans.is_empty() {
            assert!(!t.contains("Subject Alternative Name"), "{}: client certs carry no SANs", w.name);
        }
        // The chain, and the purpose openssl derives from the EKU.
        let purposes: Vec<&str> = [(w.server, "sslserver"), (w.client, "sslclient")]
            .iter()
            .filter(|p| p.0)
            .map(|p| p.1)
            .collect();
        for purpose in purposes {
            let (ok, out) = verify_with(&root, Some(&inter), purpose, &crt);
            assert!(ok && out.contains(": OK"), "{} as {purpose}: {out}", w.name);
        }
        if !w.server {
            let (ok, _) = verify_with(&root, Some(&inter), "sslserver", &crt);
            assert!(!ok, "{} is a client certificate and must not pass as a server", w.name);
        }
        // Key and certificate belong together.
        let from_key = public_key_of(&["pkey", "-pubout", "-in", key.to_str().unwrap()]);
        let from_crt = public_key_of(&["x509", "-pubkey", "-noout", "-in", crt.to_str().unwrap()]);
        assert_eq!(from_key, from_crt, "{}: key pair mismatch", w.name);
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}: key mode", w.name);
    }

    // The API server's serving certificates: server only, their SANs, each verified by its own
    // signer and by no other.
    for (name, issuer, sans) in SERVING {
        let crt = pki(dir, &format!("{name}.crt"));
        let t = x509_text(&crt);
        assert!(t.contains(key_word) && t.contains("CA:FALSE"), "{name}\n{t}");
        assert!(
            t.contains("TLS Web Server Authentication") && !t.contains("TLS Web Client Authentication"),
            "{name}\n{t}"
        );
        for san in *sans {
            let listed = t.lines().any(|l| l.split(", ").any(|part| part.trim() == *san));
            assert!(listed, "{name}: SAN {san} missing\n{t}");
        }
        let (ok, out) = verify_with(&pki(dir, &format!("{issuer}.crt")), None, "sslserver", &crt);
        assert!(ok && out.contains(": OK"), "{name}: {out}");
        let (ok, _) = verify_with(&root, Some(&inter), "sslserver", &crt);
        assert!(!ok, "{name} must not chain to the cluster root");
        let from_key = public_key_of(&["pkey", "-pubout", "-in", pki(dir, &format!("{name}.key")).to_str().unwrap()]);
        let from_crt = public_key_of(&["x509", "-pubkey", "-noout", "-in", crt.to_str().unwrap()]);
        assert_eq!(from_key, from_crt, "{name}: key pair mismatch");
    }

    // Every certificate in the bundle, not only those listed above, verifies against its chain.
    for sub in ["pki", "agent-pki"] {
        let (ca, untrusted) = if sub == "pki" {
            (root.clone(), Some(inter.as_path()))
        } else {
            (dir.join("agent-pki/agent-ca.crt"), None)
        };
        let mut n = 0;
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "crt") {
                let stem = p.file_stem().unwrap().to_string_lossy().to_string();
                let (ok, out) = match stem.as_str() {
                    s if SIGNERS.contains(&s) => verify_with(&p, None, "any", &p),
                    s if SERVING.iter().any(|(n, _, _)| *n == s) => {
                        let issuer = SERVING.iter().find(|(n, _, _)| *n == s).unwrap().1;
                        verify_with(&pki(dir, &format!("{issuer}.crt")), None, "sslserver", &p)
                    }
                    "etcd-metric-client" => verify_with(&pki(dir, "etcd-metric-ca.crt"), None, "sslclient", &p),
                    _ => verify_with(&ca, untrusted, "any", &p),
                };
                assert!(ok && out.contains(": OK"), "{}: {out}", p.display());
                n += 1;
            }
        }
        assert_eq!(n, if sub == "pki" { 30 } else { 8 }, "{sub}: certificate count");
    }

    // The operators' signers: CAs of their own, which the cluster's root does not vouch for;
    // kubelet-signer may sign one CA below it (the operator's csr-signer).
    for s in SIGNERS {
        let crt = pki(dir, &format!("{s}.crt"));
        let t = x509_text(&crt);
        assert!(t.contains("CA:TRUE") && t.contains("Certificate Sign"), "{s}: {t}");
        assert_eq!(t.contains("pathlen:1"), *s == "kubelet-signer", "{s}: {t}");
        let (ok, _) = verify_with(&root, Some(&inter), "any", &crt);
        assert!(!ok, "{s} must not chain to the cluster root");
    }

    // The service-account key pair.
    let sa = public_key_of(&["pkey", "-pubout", "-in", pki(dir, "service-account.key").to_str().unwrap()]);
    assert_eq!(sa, std::fs::read_to_string(pki(dir, "service-account.pub")).unwrap());

    // The agent PKI: always ECDSA P-256, collector serves, each node is a client named for itself.
    let agent = dir.join("agent-pki");
    let agent_ca = agent.join("agent-ca.crt");
    let t = x509_text(&agent.join("collector.crt"));
    assert!(t.contains("prime256v1") && t.contains("IP Address:192.168.126.1"), "{t}");
    let (ok, out) = verify_with(&agent_ca, None, "sslserver", &agent.join("collector.crt"));
    assert!(ok, "{out}");
    for node in ["bootstrap", "master-0", "master-1", "master-2", "worker-0", "worker-1"] {
        let crt = agent.join(format!("agent-{node}.crt"));
        let t = x509_text(&crt);
        assert!(t.contains(&format!("CN={node}\n")), "{node}: {t}");
        let (ok, out) = verify_with(&agent_ca, None, "sslclient", &crt);
        assert!(ok, "{node}: {out}");
        // Signed by the agent CA only: the cluster's root must not vouch for an agent.
        let (ok, _) = verify_with(&root, Some(&inter), "sslclient", &crt);
        assert!(!ok, "{node}: agent cert must not chain to the cluster root");
    }
}

#[test]
fn rsa_2048_pki_passes_openssl() {
    let d = example_copy();
    create(d.path(), &[]);
    check_bundle(d.path(), "Public-Key: (2048 bit)");
    let rsa = check_rsa_keys(d.path());
    assert!(rsa >= 30, "{rsa} RSA keys checked");
}

#[test]
fn ecdsa_p256_pki_passes_openssl() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    check_bundle(d.path(), "ASN1 OID: prime256v1");
}

#[test]
fn rsa_4096_pki_passes_openssl() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "rsa-4096"]);
    check_bundle(d.path(), "Public-Key: (4096 bit)");
    assert!(check_rsa_keys(d.path()) >= 30);
}
