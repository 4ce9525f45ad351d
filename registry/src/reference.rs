//! Image references: `registry[:port]/repository[:tag][@sha256:digest]`, as pull secrets,
//! imageDigestSources and release image-references write them.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `host[:port]`; docker.io for a name without one.
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not an image reference: {why}")]
pub struct ParseError {
    pub input: String,
    pub why: &'static str,
}

/// The hex of a digest a registry or a manifest names, checked before it forms any path:
/// exactly `sha256:` and 64 lowercase hex digits (the only algorithm the pull verifies). A digest
/// like `sha256:../../x` is refused here, never joined to a directory.
pub fn digest_hex(d: &str) -> Result<&str, crate::error::Error> {
    use crate::error::Error::BadDigest;
    match d.split_once(':') {
        Some(("sha256", hex)) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => Ok(hex),
        Some(("sha256", _)) => Err(BadDigest(format!(
            "{d:?} is not a sha256 digest (sha256: and 64 lowercase hex digits)"
        ))),
        Some((alg, _)) if !alg.is_empty() && alg.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            Err(BadDigest(format!("{d:?}: only sha256 digests are verified here, not {alg}")))
        }
        _ => Err(BadDigest(format!("{d:?} is not a digest (algorithm:hex)"))),
    }
}

impl Reference {
    pub fn parse(s: &str) -> Result<Reference, ParseError> {
        let err = |why| ParseError { input: s.to_string(), why };
        let s = s.trim();
        if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err("empty, or contains whitespace"));
        }
        let (rest, digest) = match s.split_once('@') {
            Some((r, d)) => {
                let hex = d.strip_prefix("sha256:").ok_or_else(|| err("only sha256 digests are used"))?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
                    return Err(err("a sha256 digest is 64 lowercase hex digits"));
                }
                (r, Some(d.to_string()))
            }
            None => (s, None),
        };
        // A tag follows the last ':' after the last '/' (a ':' before it is a port).
        let slash = rest.rfind('/');
        let (name, tag) = match rest.rfind(':') {
            Some(c) if slash.is_none_or(|sl| c > sl) => (&rest[..c], Some(rest[c + 1..].to_string())),
            _ => (rest, None),
        };
        if tag.as_deref().is_some_and(|t| t.is_empty() || t.len() > 128) {
            return Err(err("an empty or overlong tag"));
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, repo)) if first.contains('.') || first.contains(':') || first == "localhost" => {
                (first.to_string(), repo.to_string())
            }
            _ => (
                "docker.io".to_string(),
                if name.contains('/') {
                    name.to_string()
                } else {
                    format!("library/{name}")
                },
            ),
        };
        if repository.is_empty()
            || repository.split('/').any(|p| p.is_empty())
            || !repository
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/".contains(&b))
        {
            return Err(err("a repository is lowercase letters, digits and . _ - /"));
        }
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// What the registry is asked for: the digest when there is one, else the tag (default `latest`).
    pub fn reference(&self) -> &str {
        self.digest.as_deref().or(self.tag.as_deref()).unwrap_or("latest")
    }

    /// `registry/repository`: what imageDigestSources match against.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The same image in another `registry/repository`.
    pub fn moved_to(&self, name: &str) -> Result<Reference, ParseError> {
        let mut r = Reference::parse(name)?;
        r.tag = self.tag.clone();
        r.digest = self.digest.clone();
        Ok(r)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn pullspecs_as_releases_write_them() {
        let r = Reference::parse(&format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{D}")).unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.reference()),
            ("quay.io", "openshift-release-dev/ocp-v4.0-art-dev", D)
        );
        let r = Reference::parse("mirror.lab:5000/ocp4/openshift4:4.18.1-x86_64").unwrap();
        assert_eq!((r.registry.as_str(), r.tag.as_deref()), ("mirror.lab:5000", Some("4.18.1-x86_64")));
        assert_eq!(r.to_string(), "mirror.lab:5000/ocp4/openshift4:4.18.1-x86_64");
        let r = Reference::parse("busybox").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.reference()),
            ("docker.io", "library/busybox", "latest")
        );
        let m = Reference::parse(&format!("quay.io/a/b@{D}"))
            .unwrap()
            .moved_to("mirror.lab:5000/ocp/release")
            .unwrap();
        assert_eq!(m.to_string(), format!("mirror.lab:5000/ocp/release@{D}"));
    }

    #[test]
    fn bad_references_say_why() {
        for bad in [
            "",
            "quay.io/a b",
            "quay.io/Upper/x",
            "quay.io/a@sha256:12",
            "quay.io/a@md5:00",
            "quay.io//x",
            "quay.io/a:",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?}");
        }
    }
}
