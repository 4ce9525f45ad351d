//! The renders' layout and steps against what their programs declare, without running them.

use super::{layout, steps, Net};
use crate::pki::{self, keys::SystemKeys, trust};
use crate::testing::{example_cluster, release_lacking_render_inputs};
use std::collections::BTreeMap;

/// The layout's files by path: (mode, bytes).
type Files = BTreeMap<String, (u32, Vec<u8>)>;

fn laid_out() -> (crate::cluster::Cluster, pki::Pki, Files) {
    let c = example_cluster(None);
    let p = pki::issue(
        &pki::plan(&c),
        &Default::default(),
        time::OffsetDateTime::now_utc(),
        &SystemKeys,
        Default::default(),
    )
    .unwrap();
    let files = layout(&c, &p).unwrap().into_iter().map(|a| (a.path, (a.mode, a.bytes))).collect();
    (c, p, files)
}

#[test]
fn a_release_that_lacks_what_the_renders_need_is_named_whole() {
    let e = steps(&example_cluster(Some(release_lacking_render_inputs())))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no \"cluster-policy-controller\" image"), "{e}");
    assert!(e.contains("Kubernetes version is unknown"), "{e}");
}

#[test]
fn every_flag_given_is_one_its_program_declares_and_every_required_one_is_given() {
    for s in steps(&example_cluster(None)).unwrap() {
        let given = s.flags();
        let unknown: Vec<_> = given.iter().filter(|f| !s.declared.contains(f)).collect();
        assert!(unknown.is_empty(), "{}: {unknown:?} not declared by its program", s.name);
        let lacking: Vec<_> = s.required.iter().filter(|f| !given.contains(f)).collect();
        assert!(lacking.is_empty(), "{}: required {lacking:?} not given", s.name);
    }
}

#[test]
fn every_asset_a_render_reads_is_laid_out_or_made_before_it_and_none_is_empty() {
    let (c, _, files) = laid_out();
    for (path, (_, bytes)) in &files {
        assert!(!bytes.is_empty(), "{path} is empty");
    }
    let mut made: Vec<String> = Vec::new();
    for s in steps(&c).unwrap() {
        for r in &s.reads {
            assert!(
                files.contains_key(r) || made.contains(r),
                "the {} render reads {r}: neither laid out nor made before",
                s.name
            );
        }
        made.extend(s.makes.iter().cloned());
    }
}

#[test]
fn every_input_file_a_flag_names_is_checked_before_the_run() {
    // Outputs, directories read whole, and the one file a render tolerates missing.
    const NOT_READS: &[&str] = &[
        "asset-output-dir",
        "config-output-file",
        "cpc-config-output-file",
        "dest-dir",
        "asset-input-dir",
        "rendered-manifest-dir",
        "rendered-manifest-files",
        "manifest-dir",
        "cluster-auth-file",
    ];
    for s in steps(&example_cluster(None)).unwrap() {
        for a in &s.args {
            let Some((flag, path)) = a.strip_prefix("--").and_then(|a| a.split_once("=/assets/")) else {
                continue;
            };
            if !NOT_READS.contains(&flag) {
                assert!(s.reads.iter().any(|r| r == path), "{}: --{flag} names {path}, not checked", s.name);
            }
        }
    }
}

#[test]
fn the_bundles_pki_stands_under_the_installers_names() {
    let (_, p, files) = laid_out();
    let text = |f: &str| String::from_utf8(files[f].1.clone()).unwrap();
    // A serving leaf carries its signer after it, as the installer writes them.
    let lb = p.get("pki/kube-apiserver-lb-server").cert_pem.clone() + &p.get("pki/kube-apiserver-lb-signer").cert_pem;
    assert_eq!(text("tls/kube-apiserver-lb-server.crt"), lb);
    // The bound-token key is the bundle's service-account key: the render makes none of its own.
    assert_eq!(text("tls/bound-service-account-signing-key.key"), text("tls/service-account.key"));
    assert_eq!(text("tls/bound-service-account-signing-key.pub"), text("tls/service-account.pub"));
    assert_eq!(text("tls/kube-apiserver-complete-client-ca-bundle.crt"), trust::client_ca(&p));
    assert_eq!(text("tls/kube-apiserver-complete-server-ca-bundle.crt"), trust::api_server_ca(&p));
    for (path, (mode, _)) in &files {
        let secret = path.ends_with(".key") || path.starts_with("auth/") || path.contains("pull-secret");
        assert_eq!(*mode, if secret { 0o600 } else { 0o644 }, "{path}");
    }
    // The FeatureGate's status is the cluster-config-api render's to fill.
    let fg = text("manifests/99_feature-gate.yaml");
    assert!(fg.contains("kind: FeatureGate") && !fg.contains("status"), "{fg}");
    assert!(text("auth/kubeconfig-loopback").contains("https://localhost:6443"));
}

#[test]
fn the_etcd_render_runs_at_the_bootstraps_name_and_address() {
    let c = example_cluster(None);
    let b = c.nodes.iter().find(|n| n.role == crate::cluster::Role::Bootstrap).unwrap();
    let etcd = steps(&c).unwrap().into_iter().find(|s| s.name == "etcd").unwrap();
    let Net::Bootstrap { hostname, ip, subnet } = etcd.net else {
        panic!("no network")
    };
    assert_eq!((hostname.as_str(), ip), (b.hostname.as_str(), b.ip));
    assert!(subnet.parse::<ipnet::IpNet>().unwrap().contains(&ip));
    // bootkube's order: the FeatureGate's status first, etcd before the API server that reads
    // its client certificate, the MCO last.
    let order: Vec<&str> = steps(&c).unwrap().iter().map(|s| s.name).collect();
    assert_eq!(
        order,
        [
            "api",
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "mco",
            "mcc"
        ]
    );
}
