//! The helper node in one process (`hardshift lab serve`): the bundle's dnsmasq and HAProxy
//! configs run supervised, the boot files served over HTTP to the nodes they belong to, and every
//! DHCP, TFTP and HTTP step of a boot an event of its node in the collector's store.

pub mod dnsmasq_log;
pub mod http;
pub mod plan;
pub mod ports;
pub mod record;
pub mod serve;
pub mod supervise;
