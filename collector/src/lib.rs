//! The workstation side of the agent protocol: the mTLS server agents stream to, and the durable
//! store of their reports.

pub mod events;
pub mod ingest;
pub mod server;
pub mod store;
pub mod summary;
