//! Compile the .protos with protox (pure Rust): a fresh machine needs no protoc.
fn main() {
    let agent = "proto/hardshift/agent/v1/agent.proto";
    let cri = "proto/cri/runtime/v1/api.proto";
    let etcd = "proto/etcd/rpc.proto";
    println!("cargo:rerun-if-changed={agent}");
    println!("cargo:rerun-if-changed={cri}");
    println!("cargo:rerun-if-changed={etcd}");
    // No generated `AgentClient::connect(url)`: it would clash with the `Connect` rpc, and clients
    // build their own TLS channel anyway.
    tonic_prost_build::configure()
        .build_transport(false)
        .compile_fds(protox::compile([agent], ["proto"]).expect("agent.proto compiles"))
        .expect("code generation");
    // The CRI: hardshift is only ever its client (over the runtime's unix socket).
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_fds(protox::compile([cri], ["proto"]).expect("cri api.proto compiles"))
        .expect("code generation");
    // etcd's v3 API: the agent is a client of its node's member (over TLS, its own channel).
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_fds(protox::compile([etcd], ["proto"]).expect("etcd rpc.proto compiles"))
        .expect("code generation");
}
