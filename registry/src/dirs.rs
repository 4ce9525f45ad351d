//! Directories the cache and the extracted layers live in: below both `release` and `extract`.

use std::path::Path;

/// A cache directory, this user's only whatever the umask (0700).
pub(crate) fn private_dir(p: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(p)?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
}
