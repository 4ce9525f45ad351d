//! What the unit tests share: the example's inputs, compiled in (no filesystem).

use crate::cluster::{Cluster, KeyAlgorithm};
use crate::config::{self, Overrides, Sources};

/// The example's inputs; `refs` replaces its release image-references when given.
pub fn example_sources(refs: Option<String>) -> Sources {
    Sources {
        install_config: include_str!("../../examples/ocp4/install-config.yaml").into(),
        agent_config: include_str!("../../examples/ocp4/agent-config.yaml").into(),
        hardshift: Some(include_str!("../../examples/ocp4/hardshift.yaml").into()),
        release_refs: (
            "release/image-references".into(),
            refs.unwrap_or_else(|| include_str!("../../examples/ocp4/release/image-references").into()),
        ),
    }
}

/// The example's cluster, with P-256 keys (fast).
pub fn example_cluster(refs: Option<String>) -> Cluster {
    let overrides = Overrides {
        key_algorithm: Some(KeyAlgorithm::EcdsaP256),
        ..Default::default()
    };
    config::build(&example_sources(refs), &overrides).expect("the example reads")
}

/// The example's release without what the renders need that an older example lacked: the
/// cluster-policy-controller image and the Kubernetes version on its hyperkube tag.
pub fn release_lacking_render_inputs() -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(include_str!("../../examples/ocp4/release/image-references")).expect("the example's references");
    let tags = v["spec"]["tags"].as_array_mut().expect("tags");
    tags.retain(|t| t["name"] != "cluster-policy-controller");
    for t in tags.iter_mut().filter(|t| t["name"] == "hyperkube") {
        t["annotations"]
            .as_object_mut()
            .expect("annotations")
            .remove("io.openshift.build.versions");
    }
    v.to_string()
}
