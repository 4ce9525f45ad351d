//! A bundle's cluster loaded again from the inputs with the options `create` recorded, for the
//! commands that make or judge the bundle again (`verify`, `lab`, `mco`, `render`; no new keys are
//! made). Readers of what `create` wrote read its inventory instead (hardshift_bundle).

use crate::cluster::Cluster;
use crate::pipeline::{self, Error};
use std::path::{Path, PathBuf};

/// What a command's flags may say over `create`'s record: the release image and its references.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub release_image: Option<String>,
    pub release_refs: Option<PathBuf>,
}

/// The cluster of the bundle in `dir` as `create` made it: its inputs, with the options it
/// recorded unless `given` names them.
pub fn cluster(dir: &Path, given: &Given) -> Result<Cluster, Error> {
    let rec = pipeline::recorded(dir);
    let refs = given.release_refs.clone().or_else(|| rec.release_refs.clone());
    pipeline::inputs::cluster(dir, refs.as_deref(), &rec.overrides(given.release_image.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_inputs_names_what_is_missing() {
        let d = tempfile::tempdir().unwrap();
        let e = cluster(d.path(), &Given::default()).unwrap_err();
        assert!(matches!(&e, Error::Input(m) if m.contains("install-config.yaml")), "{e:?}");
    }
}
