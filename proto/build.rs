//! Compile the .proto with protox (pure Rust): a fresh machine needs no protoc.
fn main() {
    let proto = "proto/hardshift/agent/v1/agent.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"]).expect("agent.proto compiles");
    // No generated `AgentClient::connect(url)`: it would clash with the `Connect` rpc, and clients
    // build their own TLS channel anyway.
    tonic_prost_build::configure()
        .build_transport(false)
        .compile_fds(fds)
        .expect("code generation");
}
