//! install-config's `imageDigestSources`: where a by-digest pull really goes. A source matches
//! an image's `registry/repository` exactly or as a namespace prefix; its mirrors are tried in
//! order, then the source itself (unless the source is never to be contacted).

use crate::reference::Reference;

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DigestSource {
    pub source: String,
    #[serde(default)]
    pub mirrors: Vec<String>,
    #[serde(default)]
    pub source_policy: Option<String>,
}

/// Where to look for `r`, in order. Tags are not mirrored by digest sources.
pub fn candidates(sources: &[DigestSource], r: &Reference) -> Vec<Reference> {
    let name = r.name();
    let mut out = Vec::new();
    let mut never_source = false;
    if r.digest.is_some() {
        for s in sources {
            let src = s.source.trim_end_matches('/');
            let rest = if name == src {
                Some("")
            } else {
                name.strip_prefix(src).and_then(|t| t.strip_prefix('/'))
            };
            let Some(rest) = rest else { continue };
            never_source |= s.source_policy.as_deref() == Some("NeverContactSource");
            for m in &s.mirrors {
                let target = if rest.is_empty() {
                    m.trim_end_matches('/').to_string()
                } else {
                    format!("{}/{rest}", m.trim_end_matches('/'))
                };
                if let Ok(moved) = r.moved_to(&target) {
                    if !out.contains(&moved) {
                        out.push(moved);
                    }
                }
            }
        }
    }
    if !never_source {
        out.push(r.clone());
    }
    out
}

/// Whether `host` (`name` or `name:port`; 443 by default) takes a TCP connection within
/// `within`, name lookup included: a cheap "is the registry in reach from here".
pub async fn answers(host: &str, within: std::time::Duration) -> bool {
    let addr = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:443")
    };
    matches!(
        tokio::time::timeout(within, tokio::net::TcpStream::connect(addr.as_str())).await,
        Ok(Ok(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn src(source: &str, mirrors: &[&str]) -> DigestSource {
        DigestSource {
            source: source.into(),
            mirrors: mirrors.iter().map(|s| s.to_string()).collect(),
            source_policy: None,
        }
    }

    #[test]
    fn mirrors_first_then_the_source() {
        let s = [
            src("quay.io/openshift-release-dev/ocp-release", &["mirror.lab:5000/ocp4/openshift4"]),
            src("quay.io/openshift-release-dev", &["mirror.lab:5000/ocp4"]),
        ];
        let r = Reference::parse(&format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{D}")).unwrap();
        let c: Vec<String> = candidates(&s, &r).iter().map(|r| r.to_string()).collect();
        assert_eq!(c, [format!("mirror.lab:5000/ocp4/ocp-v4.0-art-dev@{D}"), r.to_string()]);
        let tag = Reference::parse("quay.io/openshift-release-dev/ocp-release:4.18.1").unwrap();
        assert_eq!(candidates(&s, &tag), vec![tag.clone()], "tags are not digest-mirrored");
        let mut never = s.to_vec();
        never[1].source_policy = Some("NeverContactSource".into());
        assert_eq!(candidates(&never, &r).len(), 1);
        // A prefix matches at a path boundary only.
        let other = Reference::parse(&format!("quay.io/openshift-release-developer/x@{D}")).unwrap();
        assert_eq!(candidates(&s, &other), vec![other.clone()]);
    }
}
