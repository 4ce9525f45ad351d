//! What a lab is made of, and the machines of a bundle's inventory it boots.

use std::path::PathBuf;

/// What a lab is made of.
pub struct Options {
    /// The bundle (`hardshift create` has run).
    pub dir: PathBuf,
    /// hack/boot-image.sh's directory: vmlinuz, initramfs.img, disk.raw.
    pub image: PathBuf,
    /// The `hardshift` binary (its collector).
    pub hardshift: PathBuf,
    /// Where logs, consoles and what the helper serves go.
    pub work: PathBuf,
    /// Short tag for the namespaces' names (unique among labs running at once).
    pub tag: String,
    /// Names the lab's DNS leaves out (a fault: `api-int.<cluster domain>`, say).
    pub drop_dns: Vec<String>,
    /// Faults the lab is started with (`crate::fault`).
    pub faults: Vec<crate::fault::Fault>,
    /// Start the collector with the lab; otherwise `start_collector` does, later.
    pub collector: bool,
    /// The collector's dashboard on the helper's loopback, this port (`Lab::web_get`).
    pub web: Option<u16>,
}

/// A node of the bundle's inventory.
#[derive(Debug, Clone)]
pub struct Machine {
    pub name: String,
    pub role: String,
    pub ip: String,
    pub mac: String,
}
