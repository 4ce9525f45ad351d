//! Compile the .protos with protox (pure Rust): a fresh machine needs no protoc.
fn main() {
    let agent = "proto/hardshift/agent/v1/agent.proto";
    let cri = "proto/cri/runtime/v1/api.proto";
    println!("cargo:rerun-if-changed={agent}");
    println!("cargo:rerun-if-changed={cri}");
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
}
