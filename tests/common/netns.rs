//! Hosts in network namespaces: the boot lab's (one implementation for the tests and
//! hack/boot-lab.sh).
pub use hardshift_boot_lab::netns::Netns;
