//! The versioned wire contract `hardshift.agent.v1` between node agent and collector.
//! Source: `proto/hardshift/agent/v1/agent.proto`.

pub mod v1 {
    tonic::include_proto!("hardshift.agent.v1");
}
