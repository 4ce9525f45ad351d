//! The workstation side of the agent protocol: the mTLS server agents stream to, and the durable
//! store of their reports.

pub mod admin;
pub mod agents;
pub mod api;
pub mod approver;
pub mod approving;
pub mod boot;
pub mod boot_stuck;
pub mod bundle;
pub mod daemon;
pub mod diagnose;
pub mod events;
pub mod gather;
pub mod ingest;
pub mod listener;
pub mod metrics;
pub mod phase;
pub mod scrub;
pub mod server;
pub mod session;
pub mod status;
pub mod store;
pub mod summary;
pub mod view;
pub mod wait;
pub mod watch;
pub mod web;

/// The collector's clock, unix milliseconds: Ack timestamps, receipt times, "last seen".
pub use hardshift_proto::now_ms;
