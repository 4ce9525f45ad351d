//! hardshift-bundle: the bundle directory `create` writes, as a contract of its own. Where each
//! part lives (`layout`), how a generation is read and one writer held off another (`fsio`),
//! the typed `inventory` every later reader knows the install by, the `secrets` what leaves the
//! workstation is scrubbed of, the `certificates` and identity /metrics name, and the inline
//! file contents of an Ignition config read back (`data_url`). The generator writes it; the
//! collector, the CLI's read commands and boot-lab read it, and link nothing of the generator.

pub mod certificates;
pub mod data_url;
pub mod fsio;
pub mod inventory;
pub mod layout;
pub mod names;
pub mod secrets;

pub use hardshift_proto::vocab::Role;
pub use inventory::Inventory;
