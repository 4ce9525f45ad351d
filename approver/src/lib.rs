//! The kubelets' CSRs: which to approve for the bundle's inventory, and why every other one is
//! left pending. One set of rules for `hardshift approve-csrs`, the collector's view and a single
//! node's post-reboot step (`hardshift-agent approve-csrs`), so none of them approves by a
//! username alone.

pub mod list;
pub mod request;
mod rules;

pub use rules::*;
