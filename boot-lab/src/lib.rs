//! The boot lab: a bundle's own lab (dnsmasq DHCP and DNS, HAProxy, HTTP, the collector) live
//! in network namespaces, and VMs that PXE-boot through it under QEMU. Used by tests/boot.rs and
//! by `hardshift-boot-lab` (hack/boot-lab.sh, hack/bench-boot.sh).

pub mod fault;
pub mod lab;
pub mod netns;
pub mod watch;
pub mod workdir;
