//! The keys each input file may hold, so that a typo is an error and not a silent default.
//!
//! The typed structs read only what hardshift uses; these shapes list every key the
//! installer (pkg/types InstallConfig), the agent installer (AgentConfig v1beta1) and nmstate
//! accept, so a valid file is never refused and a misspelled key is found wherever it is.
//! Subtrees hardshift does not read and whose schema is the platform's (`platform.vsphere`,
//! an interface's `bond` settings) are `Any`.

use super::diag::Diagnostic;
use super::yaml::Doc;
use serde_json::Value;

/// What a node may be.
pub enum Shape {
    /// Anything: not checked here.
    Any,
    /// A mapping with exactly these keys.
    Map(&'static [(&'static str, Shape)]),
    /// A sequence whose items have this shape.
    List(&'static Shape),
}

use Shape::{Any, List, Map};

const OBJECT_META: Shape = Map(&[
    ("name", Any),
    ("namespace", Any),
    ("labels", Any),
    ("annotations", Any),
    ("generateName", Any),
    ("uid", Any),
    ("resourceVersion", Any),
    ("generation", Any),
    ("creationTimestamp", Any),
    ("deletionTimestamp", Any),
    ("deletionGracePeriodSeconds", Any),
    ("ownerReferences", Any),
    ("finalizers", Any),
    ("managedFields", Any),
    ("selfLink", Any),
]);

const MACHINE_POOL: Shape = Map(&[
    ("name", Any),
    ("replicas", Any),
    ("platform", Any),
    ("hyperthreading", Any),
    ("architecture", Any),
    ("fencing", Any),
    ("diskSetup", Any),
]);

const CLUSTER_NETWORK: Shape = Map(&[("cidr", Any), ("hostPrefix", Any), ("hostSubnetLength", Any)]);

const IMAGE_SOURCE: Shape = Map(&[("source", Any), ("mirrors", Any), ("sourcePolicy", Any)]);

pub const INSTALL_CONFIG: Shape = Map(&[
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", OBJECT_META),
    ("additionalTrustBundle", Any),
    ("additionalTrustBundlePolicy", Any),
    ("sshKey", Any),
    ("baseDomain", Any),
    (
        "networking",
        Map(&[
            ("networkType", Any),
            ("machineNetwork", List(&Map(&[("cidr", Any)]))),
            ("clusterNetwork", List(&CLUSTER_NETWORK)),
            ("serviceNetwork", Any),
            ("clusterNetworkMTU", Any),
            ("ovnKubernetesConfig", Any),
            ("machineCIDR", Any),
            ("type", Any),
            ("serviceCIDR", Any),
            ("clusterNetworks", List(&CLUSTER_NETWORK)),
        ]),
    ),
    ("controlPlane", MACHINE_POOL),
    ("arbiter", MACHINE_POOL),
    ("compute", List(&MACHINE_POOL)),
    (
        "platform",
        Map(&[
            ("none", Any),
            ("baremetal", Any),
            ("external", Any),
            ("vsphere", Any),
            ("nutanix", Any),
            ("openstack", Any),
            ("aws", Any),
            ("azure", Any),
            ("gcp", Any),
            ("ibmcloud", Any),
            ("powervs", Any),
            ("ovirt", Any),
            ("libvirt", Any),
            ("alibabacloud", Any),
        ]),
    ),
    ("pullSecret", Any),
    ("proxy", Map(&[("httpProxy", Any), ("httpsProxy", Any), ("noProxy", Any)])),
    ("imageContentSources", List(&IMAGE_SOURCE)),
    ("imageDigestSources", List(&IMAGE_SOURCE)),
    ("publish", Any),
    ("operatorPublishingStrategy", Any),
    ("fips", Any),
    ("cpuPartitioningMode", Any),
    ("credentialsMode", Any),
    ("bootstrapInPlace", Map(&[("installationDisk", Any)])),
    (
        "capabilities",
        Map(&[("baselineCapabilitySet", Any), ("additionalEnabledCapabilities", Any)]),
    ),
    ("featureSet", Any),
    ("featureGates", Any),
]);

const NM_ADDRESS: Shape = Map(&[
    ("ip", Any),
    ("prefix-length", Any),
    ("valid-life-time", Any),
    ("preferred-life-time", Any),
]);

const NM_IP: Shape = Map(&[
    ("enabled", Any),
    ("dhcp", Any),
    ("autoconf", Any),
    ("address", List(&NM_ADDRESS)),
    ("auto-dns", Any),
    ("auto-gateway", Any),
    ("auto-routes", Any),
    ("auto-route-table-id", Any),
    ("auto-route-metric", Any),
    ("dhcp-client-id", Any),
    ("dhcp-duid", Any),
    ("dhcp-send-hostname", Any),
    ("dhcp-custom-hostname", Any),
    ("addr-gen-mode", Any),
    ("allow-extra-address", Any),
    ("token", Any),
    ("forwarding", Any),
    ("dhcp-timeout", Any),
]);

/// nmstate's base interface keys plus each type's own section (not checked further).
const NM_INTERFACE: Shape = Map(&[
    ("name", Any),
    ("profile-name", Any),
    ("description", Any),
    ("type", Any),
    ("state", Any),
    ("identifier", Any),
    ("mac-address", Any),
    ("permanent-mac-address", Any),
    ("mtu", Any),
    ("min-mtu", Any),
    ("max-mtu", Any),
    ("wait-ip", Any),
    ("ipv4", NM_IP),
    ("ipv6", NM_IP),
    ("mptcp", Any),
    ("controller", Any),
    ("accept-all-mac-addresses", Any),
    ("copy-mac-from", Any),
    ("ovs-db", Any),
    ("802.1x", Any),
    ("lldp", Any),
    ("ethtool", Any),
    ("dispatch", Any),
    ("ethernet", Any),
    ("link-aggregation", Any),
    ("bridge", Any),
    ("vlan", Any),
    ("vxlan", Any),
    ("mac-vlan", Any),
    ("mac-vtap", Any),
    ("ipvlan", Any),
    ("vrf", Any),
    ("infiniband", Any),
    ("veth", Any),
    ("team", Any),
    ("macsec", Any),
    ("libreswan", Any),
    ("hsr", Any),
    ("xfrm", Any),
    ("patch", Any),
    ("dpdk", Any),
]);

const NM_ROUTE: Shape = Map(&[
    ("destination", Any),
    ("next-hop-address", Any),
    ("next-hop-interface", Any),
    ("metric", Any),
    ("table-id", Any),
    ("state", Any),
    ("weight", Any),
    ("route-type", Any),
    ("cwnd", Any),
    ("onlink", Any),
    ("mtu", Any),
    ("source", Any),
    ("initcwnd", Any),
    ("initrwnd", Any),
    ("quickack", Any),
    ("advmss", Any),
    ("vrf-name", Any),
]);

const NM_STATE: Shape = Map(&[
    ("interfaces", List(&NM_INTERFACE)),
    (
        "dns-resolver",
        Map(&[
            ("config", Map(&[("server", Any), ("search", Any), ("options", Any)])),
            ("running", Any),
        ]),
    ),
    ("routes", Map(&[("config", List(&NM_ROUTE)), ("running", Any)])),
    ("route-rules", Any),
    ("ovs-db", Any),
    ("ovn", Any),
    ("hostname", Any),
]);

pub const AGENT_CONFIG: Shape = Map(&[
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", OBJECT_META),
    ("rendezvousIP", Any),
    ("bootArtifactsBaseURL", Any),
    ("additionalNTPSources", Any),
    ("minimalISO", Any),
    (
        "hosts",
        List(&Map(&[
            ("hostname", Any),
            ("role", Any),
            ("rootDeviceHints", Any),
            ("interfaces", List(&Map(&[("name", Any), ("macAddress", Any)]))),
            ("networkConfig", NM_STATE),
        ])),
    ),
]);

/// hardshift's own file: the same keys as `HardshiftConfig` (a unit test holds them equal).
pub const HARDSHIFT_CONFIG: Shape = Map(&[
    ("apiVersion", Any),
    ("kind", Any),
    ("loadBalancer", Map(&[("apiVIP", Any), ("ingressVIP", Any)])),
    ("helper", Map(&[("ip", Any)])),
    ("collector", Map(&[("address", Any), ("port", Any), ("extraSANs", Any)])),
    (
        "pki",
        Map(&[("keyAlgorithm", Any), ("caValidityDays", Any), ("leafValidityDays", Any)]),
    ),
    (
        "lab",
        Map(&[
            ("vcpus", Any),
            ("memoryMiB", Any),
            ("diskGiB", Any),
            ("httpBaseUrl", Any),
            ("installDevice", Any),
            ("liveAgent", Any),
            ("installImageURL", Any),
            ("installImageUnsigned", Any),
        ]),
    ),
    ("release", Map(&[("image", Any)])),
    ("dns", Map(&[("records", List(&Map(&[("name", Any), ("ip", Any)])))])),
]);

/// Report every key of `doc` that `shape` does not allow, with a "did you mean".
pub fn check(file: &str, doc: &Doc, shape: &Shape, out: &mut Vec<Diagnostic>) {
    walk(file, doc, shape, &doc.value, "", out);
}

fn walk(file: &str, doc: &Doc, shape: &Shape, value: &Value, path: &str, out: &mut Vec<Diagnostic>) {
    match (shape, value) {
        (Map(fields), Value::Object(map)) => {
            for (key, child) in map {
                let here = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match fields.iter().find(|(name, _)| name == key) {
                    Some((_, inner)) => walk(file, doc, inner, child, &here, out),
                    None => out.push(Diagnostic {
                        file: file.into(),
                        pos: doc.pos(&here),
                        path: here,
                        message: format!("unknown field `{key}`"),
                        hint: Some(hint(key, fields)),
                    }),
                }
            }
        }
        (List(item), Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                walk(file, doc, item, v, &format!("{path}[{i}]"), out);
            }
        }
        // Wrong kinds (a list where a mapping belongs) are the typed parse's to report.
        _ => {}
    }
}

fn hint(key: &str, fields: &[(&str, Shape)]) -> String {
    let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
    match did_you_mean(key, &names) {
        Some(best) => format!("did you mean `{best}`?"),
        None => format!("the keys allowed here are: {}", names.join(", ")),
    }
}

pub use hardshift_bundle::names::did_you_mean;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::yaml;

    fn unknown(shape: &Shape, text: &str) -> Vec<String> {
        let doc = yaml::parse(text).unwrap();
        let mut out = Vec::new();
        check("f.yaml", &doc, shape, &mut out);
        out.iter().map(|d| d.to_string()).collect()
    }

    #[test]
    fn typos_are_found_with_a_suggestion() {
        let got = unknown(
            &INSTALL_CONFIG,
            "apiVersion: v1\nimageDigestSource:\n- source: a\n  mirror: [b]\nbaseDomian: x\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("f.yaml:2:1: imageDigestSource: unknown field"), "{got:?}");
        assert!(got[0].contains("did you mean `imageDigestSources`?"));
        assert!(got[1].starts_with("f.yaml:5:1: baseDomian"), "{got:?}");
        assert!(got[1].contains("did you mean `baseDomain`?"));
        let got = unknown(
            &AGENT_CONFIG,
            "hosts:\n- hostname: a\n  networkConfig:\n    dns-resolvr: {}\n    route: {}\n    interfaces:\n    - name: e\n      mac_address: x\n",
        );
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.iter().any(|g| g.contains("dns-resolvr") && g.contains("`dns-resolver`")));
        assert!(got.iter().any(|g| g.contains("route:") && g.contains("`routes`")));
        assert!(got
            .iter()
            .any(|g| g.contains("hosts[0].networkConfig.interfaces[0].mac_address") && g.contains("`mac-address`")));
    }

    #[test]
    fn far_off_keys_list_what_is_allowed() {
        let got = unknown(&HARDSHIFT_CONFIG, "helper:\n  zzz: 1\n");
        assert!(got[0].contains("the keys allowed here are: ip"), "{got:?}");
    }

    #[test]
    fn the_examples_are_clean() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ocp4/");
        for (file, shape) in [
            ("install-config.yaml", &INSTALL_CONFIG),
            ("agent-config.yaml", &AGENT_CONFIG),
            ("hardshift.yaml", &HARDSHIFT_CONFIG),
        ] {
            let text = std::fs::read_to_string(format!("{root}{file}")).unwrap();
            assert_eq!(unknown(shape, &text), Vec::<String>::new(), "{file}");
        }
    }

    #[test]
    fn hardshift_shape_matches_its_struct() {
        // Every key of the shape is known to the struct (deny_unknown_fields): they cannot drift.
        let Map(sections) = HARDSHIFT_CONFIG else { unreachable!() };
        for (name, shape) in sections {
            let keys: Vec<&str> = match shape {
                Map(fields) => fields.iter().map(|(k, _)| *k).collect(),
                _ => vec![],
            };
            for key in keys {
                let one = serde_json::json!({ *name: { key: Value::Null } });
                let r: Result<crate::config::hardshift_config::HardshiftConfig, _> = serde_json::from_value(one);
                if let Err(e) = r {
                    assert!(!e.to_string().contains("unknown field"), "{name}.{key}: {e}");
                }
            }
        }
    }
}
