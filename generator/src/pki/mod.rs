//! The cluster's PKI: `plan` says what must exist, `issue` makes or reuses it.

pub mod inspect;
pub mod issue;
pub mod keys;
pub mod plan;
pub mod trust;

pub use issue::{issue, issue_staged, missing_cas, vanished_cas, Existing, Issued, Material, Options, Outcome, Pki, PkiError};
pub use plan::{plan, CertSpec, Kind, AGENT_DIR, OPENSHIFT_DIR};
