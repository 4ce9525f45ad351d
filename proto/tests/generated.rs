//! The committed code in src/generated/ is what the .protos generate today: this regenerates it
//! (protox, pure Rust, and tonic's generator with the settings the crate was built with) and
//! compares byte for byte. `HARDSHIFT_REGEN=1` writes the new code instead, after a .proto changed.

use std::path::{Path, PathBuf};

/// Each .proto with the generator settings its module needs.
fn generate(out: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let fds = |file: &str| protox::compile([root.join(file)], [&root]).unwrap_or_else(|e| panic!("{file}: {e}"));
    // No generated `AgentClient::connect(url)`: it would clash with the `Connect` rpc, and clients
    // build their own TLS channel anyway.
    tonic_prost_build::configure()
        .build_transport(false)
        .out_dir(out)
        .compile_fds(fds("hardshift/agent/v1/agent.proto"))
        .expect("agent.proto generates");
    // The CRI and etcd's v3 API: hardshift is only ever their client.
    for file in ["cri/runtime/v1/api.proto", "etcd/rpc.proto"] {
        tonic_prost_build::configure()
            .build_server(false)
            .build_transport(false)
            .out_dir(out)
            .compile_fds(fds(file))
            .unwrap_or_else(|e| panic!("{file} generates: {e}"));
    }
}

#[test]
fn the_committed_code_is_what_the_protos_generate() {
    let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/generated");
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path());
    let mut names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    let want = ["etcdserverpb.rs", "hardshift.agent.v1.rs", "runtime.v1.rs"];
    assert_eq!(names, want, "the .protos generate other modules than src/lib.rs includes");
    let regen = std::env::var_os("HARDSHIFT_REGEN").is_some();
    let mut stale = Vec::new();
    for name in want {
        let fresh = std::fs::read(tmp.path().join(name)).unwrap();
        let path = committed.join(name);
        if std::fs::read(&path).ok().as_deref() == Some(&fresh[..]) {
            continue;
        }
        if regen {
            std::fs::write(&path, &fresh).unwrap();
        } else {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "src/generated/{stale:?} differ from what the .protos generate: run `HARDSHIFT_REGEN=1 cargo test -p hardshift-proto --test generated` and commit the result"
    );
}
